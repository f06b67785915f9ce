#!/bin/sh
# Instruction counts per operation (valgrind's callgrind), stable where the
# wall clock on a shared machine is not. Usage:
#   bench/callgrind.sh [BUILD_DIR] [N]        (defaults: build-bench, 1000)
# Runs `session_bench --callgrind=N` under callgrind with collection off
# except in the measured regions, one dump per region, and prints the
# instructions per operation of each; then where the instructions of one
# protected-extend-host go: the inclusive count per operation of each
# function of the session engine and the pipeline that callgrind saw (a
# function the compiler inlined is counted in its caller). Note: valgrind's CPU has no SHA-NI, so
# OpenSSL takes its AVX2 SHA-256 path here; counts compare code paths, they
# do not convert to time on this CPU.
set -eu
build=${1:-build-bench}
n=${2:-1000}
bin=$build/bench/session_bench
[ -x "$bin" ] || { echo "no $bin: build the session_bench target first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$out/cg" "$bin" --callgrind="$n" \
  >"$out/stdout" 2>"$out/stderr" || { cat "$out/stderr" >&2; exit 1; }
cat "$out/stdout"
printf '%-34s %12s %8s %14s\n' region instructions count "per operation"
for f in "$out"/cg.*; do
  name=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
  [ -n "$name" ] || continue
  total=$(sed -n 's/^totals: //p' "$f")
  count=$(sed -n "s/.*[0-9] $name x\([0-9]*\).*/\1/p" "$out/stdout")
  printf '%-34s %12s %8s %14s\n' "$name" "$total" "$count" "$((total / count))"
done

# The phases of one protected extend (host only), inclusive per operation.
dump=$(grep -l '^desc: Trigger: Client Request: protected-extend-host$' "$out"/cg.* | head -n 1)
[ -n "$dump" ] || exit 0
printf '\nprotected-extend-host, inclusive instructions per operation (callgrind_annotate --inclusive=yes):\n'
callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$dump" 2>/dev/null |
  awk -v n="$n" '
    # The function table only; an inlined function shows once per source
    # file it was inlined from: its first (largest) entry is kept.
    /file:function/ { table = 1 }
    table && /^$/ { exit }
    /^ *[0-9,]+ +\([ 0-9.]+%\) +/ {
      count = $1; gsub(",", "", count)
      line = $0; sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +/, "", line)
      sub(/ \[[^]]*\]$/, "", line); sub(/^[^:]*:/, "", line)
      if (line ~ /^(tpmsec::|sha256_block|SHA256_|EVP_|RAND_|OPENSSL_cleanse|CRYPTO_memcmp|malloc|free|operator new|operator delete)/ &&
          !(line in seen) && count / n >= 20) {
        seen[line] = 1
        printf "  %9d  %s\n", count / n, substr(line, 1, 110)
      }
    }'
