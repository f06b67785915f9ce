#!/usr/bin/env bash
# scripts/check-front-ends can fail: the tree passes; on a copy of it with
# one other way in planted at a time in a front end (a transport by its own
# opener, a Tpm, a SessionFactory, an adopted stack, also in the files that
# adopted --emulate's and replay's measured stacks before it was removed) it
# exits 1 naming the file and line; the same line in a layer below passes.
#   tests/checks/check_front_ends_test.sh CHECK SOURCE_DIR
set -euo pipefail
check=${1:?usage: check_front_ends_test.sh CHECK SOURCE_DIR}
src=${2:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_front_ends_test: $*" >&2; exit 1; }

"$check" "$src" >/dev/null || fail "the tree as it is fails: $("$check" "$src" 2>&1)"

plant() {  # description, front end directory, the planted line[, the file's name]
  local what=$1 dir=$2 line=$3 file=${4:-planted.cc} out rc=0
  rm -rf "$work/tree"; mkdir -p "$work/tree/$dir"
  printf '// %s\nvoid planted() {\n  %s\n}\n' "$what" "$line" > "$work/tree/$dir/$file"
  out=$("$check" "$work/tree" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit status $rc, expected 1 (output: $out)"
  grep -q "^$dir/$file:3: " <<<"$out" || fail "$what: not named: $out"
  rm -rf "$work/tree"; mkdir -p "$work/tree/src/protect"
  printf 'void planted() {\n  %s\n}\n' "$line" > "$work/tree/src/protect/planted.cc"
  "$check" "$work/tree" >/dev/null || fail "$what: refused below the front ends"
  echo "ok: $what"
}

plant "a swtpm opened by its opener" src/cli 'auto t = open_swtpm(address);'
plant "a bus transport opened in the TCTI" src/tcti 'auto t = open_bus_transport(spec);'
plant "a Tpm of its own" src/cli 'Tpm tpm(*transport);'
plant "a SessionFactory of its own" src/tcti 'auto f = SessionFactory::create(tpm, config);'
plant "an adopted stack" src/cli 'auto p = ProtectedTpm::adopt(request, base, tpm, info, facts);'
plant "--emulate's stack adopted" src/cli 'out.protect = ProtectedTpm::adopt(request, *out.base, tpm, info, facts);' cli.cc
plant "replay's stack adopted" src/cli 'auto p = ProtectedTpm::adopt(request, *tpm.base, *tpm.tpm, tpm.info, f);' \
  replay_command.cc
echo "check_front_ends: every planted way in is refused in a front end, the tree passes"
