#!/usr/bin/env bash
# scripts/check-includes can fail: on a copy of the tree with one upward
# include planted at a time, it exits non-zero and names the file, the line,
# the header's layer and the layer that may not see it, in one line; on the
# copy as it is, it passes silently.
#   tests/checks/check_includes_test.sh CHECK TABLE SOURCE_DIR
set -euo pipefail
check=${1:?usage: check_includes_test.sh CHECK TABLE SOURCE_DIR}
table=${2:?}
src=${3:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_includes_test: $*" >&2; exit 1; }

fresh() { rm -rf "$work/tree"; mkdir "$work/tree"; cp -r "$src/src" "$src/include" "$work/tree/"; }

fresh
out=$("$check" "$table" "$work/tree" 2>&1) || fail "the tree as it is fails: $out"
[ -z "$out" ] || fail "the tree as it is passes but prints: $out"

expect() {  # planted description, the one line expected
  local what=$1 want=$2 out rc=0
  out=$("$check" "$table" "$work/tree" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit status $rc, expected 1 (output: $out)"
  [ "$out" = "$want" ] || fail "$what: printed
$out
expected
$want"
  echo "ok: $what: $out"
}

# A core source includes an upper layer's public header.
fresh
sed -i '12i #include "tpmsec/emulation/latency_model.h"' "$work/tree/src/wire/bytes.cc"
expect "core source, emulation header" \
  "src/wire/bytes.cc:12: includes tpmsec/emulation/latency_model.h (layer emulation), which core may not see"

# A core source includes another layer's private header (src/transport/).
fresh
sed -i '3i #include "transport/startup.h"' "$work/tree/src/tpm/tpm.cc"
expect "core source, transports' private header" \
  "src/tpm/tpm.cc:3: includes transport/startup.h (layer transports), which core may not see"

# A layer that may see another (the protect path builds on the host)
# includes that layer's private header (src/host/): only its public ones.
fresh
sed -i '3i #include "host/state_file.h"' "$work/tree/src/protect/anchor.cc"
expect "protect source, host's private header" \
  "src/protect/anchor.cc:3: includes host/state_file.h (private to layer host), which protect may not include"

# A contract at the top of include/tpmsec/ (the core's) includes a host header.
fresh
sed -i '3i #include <tpmsec/host/files.h>' "$work/tree/include/tpmsec/bytes.h"
expect "core contract, host header" \
  "include/tpmsec/bytes.h:3: includes tpmsec/host/files.h (layer host), which core may not see"

# A layer includes a layer beside it: the policy decision does not build on the host.
fresh
sed -i '1i #include "tpmsec/host/data_dir.h"' "$work/tree/src/policy/policy_match.cc"
expect "policy source, host header" \
  "src/policy/policy_match.cc:1: includes tpmsec/host/data_dir.h (layer host), which policy may not see"

# A front end sees only what it links: the TCTI links no calibration.
fresh
sed -i '1i #include "tpmsec/calibration/calibration.h"' "$work/tree/src/tcti/tcti_config.cc"
expect "TCTI source, calibration header" \
  "src/tcti/tcti_config.cc:1: includes tpmsec/calibration/calibration.h (layer calibration), which tcti may not see"

# The resource manager's internals (handle_space.h, resource_manager.h) are
# the server layer's and its composer's (serve's sources): a front end hands
# Server a ClientConnection. The D-Bus front, the CLI, the socket front:
fresh
sed -i '3i #include "tpmsec-server/resource_manager/handle_space.h"' "$work/tree/src/tabrmd/tabrmd_front.cc"
expect "D-Bus front, the handle space" \
  "src/tabrmd/tabrmd_front.cc:3: includes tpmsec-server/resource_manager/handle_space.h (internal to layer resource_manager), which a front end (tabrmd) may not include"
fresh
sed -i '3i #include "tpmsec-server/resource_manager/resource_manager.h"' "$work/tree/src/cli/serve_command.cc"
expect "CLI, the resource manager" \
  "src/cli/serve_command.cc:3: includes tpmsec-server/resource_manager/resource_manager.h (internal to layer resource_manager), which a front end (cli) may not include"
fresh
sed -i '3i #include "tpmsec-server/resource_manager/handle_space.h"' "$work/tree/src/socket_front/socket_front.cc"
expect "socket front, the handle space" \
  "src/socket_front/socket_front.cc:3: includes tpmsec-server/resource_manager/handle_space.h (internal to layer resource_manager), which a front end (socket_front) may not include"
# The composer's public header is its front ends' view: not there either.
fresh
sed -i '3i #include "tpmsec-server/resource_manager/handle_space.h"' "$work/tree/include/tpmsec-server/protected_server/protected_server.h"
expect "protected server's public header, the handle space" \
  "include/tpmsec-server/protected_server/protected_server.h:3: includes tpmsec-server/resource_manager/handle_space.h (internal to layer resource_manager), which a front end (protected_server) may not include"
# A front end that does not exist yet (a CUSE /dev/tpmrm0) is one by default.
fresh
mkdir "$work/tree/src/cuse"
printf '#include "tpmsec-server/resource_manager/server.h"\n#include "tpmsec-server/resource_manager/handle_space.h"\n' >"$work/tree/src/cuse/cuse_front.cc"
cp "$table" "$work/table"
printf 'sees cuse cuse resource_manager core\ndir cuse src/cuse\n' >>"$work/table"
table_kept=$table
table=$work/table
expect "a new front end, the handle space" \
  "src/cuse/cuse_front.cc:2: includes tpmsec-server/resource_manager/handle_space.h (internal to layer resource_manager), which a front end (cuse) may not include"
table=$table_kept

# The library's headers are in include/tpmsec/, the servers' in
# include/tpmsec-server/: a header of the resource manager in the library's root.
fresh
mkdir "$work/tree/include/tpmsec/resource_manager"
echo '// nothing' >"$work/tree/include/tpmsec/resource_manager/x.h"
rc=0; out=$("$check" "$table" "$work/tree" 2>&1) || rc=$?
[ "$rc" = 2 ] && [ "$out" = "include/tpmsec/resource_manager/x.h: a header of layer resource_manager, whose public headers are in include/tpmsec-server/ (CMakeLists.txt: TPMSEC_SERVER_LAYERS)" ] ||
  fail "a server header in the library's root: exit status $rc, printed: $out"
echo "ok: a server header in the library's root: $out"

# A folder holds one layer (the emulator's server was src/emulation/server/,
# above measure inside a folder below it).
fresh
cp "$table" "$work/table"
printf 'sees cuse cuse resource_manager core\ndir cuse src/tabrmd/cuse\n' >>"$work/table"
rc=0; out=$("$check" "$work/table" "$work/tree" 2>&1) || rc=$?
[ "$rc" = 2 ] && [ "$out" = "src/tabrmd/cuse (layer cuse) is inside src/tabrmd (layer tabrmd): a folder holds one layer" ] ||
  fail "a layer inside another's folder: exit status $rc, printed: $out"
echo "ok: a layer inside another's folder: $out"

# A header in a folder that is no layer's is an error too (it would be checked by nothing).
fresh
mkdir "$work/tree/include/tpmsec/stray"
echo '// nothing' >"$work/tree/include/tpmsec/stray/x.h"
rc=0; out=$("$check" "$table" "$work/tree" 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ $out == "include/tpmsec/stray/x.h: belongs to no layer"* ]] ||
  fail "a header of no layer: exit status $rc, printed: $out"
echo "ok: header of no layer: $out"
