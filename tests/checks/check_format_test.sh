#!/usr/bin/env bash
# scripts/check-format: the tree follows .clang-format; a planted file that
# does not fails it with one line naming the file.
set -euo pipefail
check=$1 root=$2
"$check" "$root"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cp "$root/.clang-format" "$t/"
mkdir -p "$t/src/x"
printf 'int   f( int a ){return a;}\n' > "$t/src/x/planted.cc"
if out=$("$check" "$t" 2>&1); then echo "a misformatted file passed: $out" >&2; exit 1; fi
echo "$out" | grep -q 'src/x/planted.cc is not formatted' || { echo "unexpected: $out" >&2; exit 1; }
echo "check_format: a misformatted file fails the check"
