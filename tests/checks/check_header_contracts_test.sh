#!/usr/bin/env bash
# scripts/check-header-contracts: the tree passes; a copy of include/ with one
# header's top comment grown to 21 lines fails with one line naming it; 20
# lines pass.
set -euo pipefail
check=$1 root=$2
"$check" "$root"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cp -r "$root/include" "$t/include"
h=$t/include/tpmsec/planted.h
{
  for i in $(seq 1 21); do echo "// line $i of an essay."; done
  echo '#ifndef TPMSEC_PLANTED_H_'
  echo '#define TPMSEC_PLANTED_H_'
  echo '#endif  // TPMSEC_PLANTED_H_'
} > "$h"
if out=$("$check" "$t" 2>&1); then echo "a 21-line top comment passed: $out" >&2; exit 1; fi
[ "$out" = 'include/tpmsec/planted.h: 21 lines of top comment (at most 20)' ] || { echo "unexpected: $out" >&2; exit 1; }
sed -i 1d "$h"
"$check" "$t" >/dev/null
echo "check_header_contracts: a planted 21-line top comment fails, 20 lines pass"
