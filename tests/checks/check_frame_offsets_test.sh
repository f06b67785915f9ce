#!/usr/bin/env bash
# scripts/check-frame-offsets can fail: the tree passes; on a copy of it with
# one raw frame offset planted at a time outside src/wire (a handle patched
# after the header, a header field read at its position, a header skipped by
# its length, a frame header written by hand, a be32 decoder of its own) it
# exits 1 naming the file and line; the same code inside src/wire passes.
#   tests/checks/check_frame_offsets_test.sh CHECK SOURCE_DIR
set -euo pipefail
check=${1:?usage: check_frame_offsets_test.sh CHECK SOURCE_DIR}
src=${2:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_frame_offsets_test: $*" >&2; exit 1; }

"$check" "$src" >/dev/null || fail "the tree as it is fails: $("$check" "$src" 2>&1)"

plant() {  # description, directory under src/, the planted line
  local what=$1 dir=$2 line=$3 out rc=0
  rm -rf "$work/tree"; mkdir -p "$work/tree/src/$dir"
  printf '#include "tpmsec/wire.h"\n// %s\nvoid planted(tpmsec::Bytes& frame, tpmsec::Bytes& response) {\n  %s\n}\n' \
    "$what" "$line" > "$work/tree/src/$dir/planted.cc"
  out=$("$check" "$work/tree" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit status $rc, expected 1 (output: $out)"
  grep -q "^src/$dir/planted.cc:4: raw frame offset" <<<"$out" || fail "$what: not named: $out"
  # The codec's own sources may: the same line in src/wire passes.
  rm -rf "$work/tree"; mkdir -p "$work/tree/src/wire"
  printf 'void planted() {\n  %s\n}\n' "$line" > "$work/tree/src/wire/planted.cc"
  "$check" "$work/tree" >/dev/null || fail "$what: refused in src/wire"
  echo "ok: $what"
}

plant "a handle patched after the header" server 'store_be32(frame.data() + kFrameHeaderBytes + 4 * i, h);'
plant "a response handle patched at the header" server 'store_be32(response.data() + kFrameHeaderBytes, v);'
plant "a parameter patched from the end" server 'store_be32(frame.data() + frame.size() - 4, h);'
plant "the size read at its position" transport 'uint32_t size = load_be32(response.data() + 2);'
plant "the header skipped by its length" wrap 'auto body = ByteView(response).subspan(kFrameHeaderBytes);'
plant "a header-sized buffer" transport 'Bytes response(10);'
plant "a frame header written by hand" server 'auto size = w.begin_total_size32("commandSize");'
plant "a be32 decoder of its own" tcti 'uint32_t be32(const uint8_t* p) { return p[0]; }'
echo "check_frame_offsets: every planted raw frame offset is refused outside src/wire, the tree passes"
