#!/usr/bin/env bash
# scripts/check-function-lengths: the tree passes; a planted 90-line function
# fails it with one line naming it; the same with a "// Long:" reason passes.
set -euo pipefail
check=$1 root=$2
"$check" "$root"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/x"
{
  echo 'int long_one(int a) {'
  for i in $(seq 1 88); do echo "  a += $i;"; done
  echo '  return a;'
  echo '}'
} > "$t/src/x/planted.cc"
if out=$("$check" "$t" 2>&1); then echo "a 91-line function passed: $out" >&2; exit 1; fi
echo "$out" | grep -q 'src/x/planted.cc:1: long_one is 91 lines' || { echo "unexpected: $out" >&2; exit 1; }
{ echo '// Long: one table of 88 steps, read top to bottom.'; cat "$t/src/x/planted.cc"; } > "$t/src/x/p2" && mv "$t/src/x/p2" "$t/src/x/planted.cc"
"$check" "$t" >/dev/null
echo "check_function_lengths: a planted long function fails, one with a reason passes"
