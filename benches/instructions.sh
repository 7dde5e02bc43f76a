#!/usr/bin/env bash
# Count the instructions pcapsleuth executes on a capture (valgrind's callgrind), for A/B
# comparisons on a noisy machine: wall time of identical runs varies by +-20 % on a shared VM,
# the instruction count by well under 0.1 %. Instructions are not time (cache misses, branch
# mispredictions and allocator behaviour are not counted), so speed claims still come from
# benches/compare.sh; this tells whether a change made the work smaller, and where the work is.
#
# Usage: benches/instructions.sh FILE [BINARY...]
#   FILE     a capture small enough for callgrind (about 50x slower than native: the first
#            200,000 packets of tcp-heavy.pcap, `editcap -r tcp-heavy.pcap th200k.pcap 1-200000`,
#            take about a minute)
#   BINARY   pcapsleuth binaries to compare (default: target/release/pcapsleuth)
# Environment:
#   ARGS     arguments before FILE (default: analyze --threads 1 --format json)
#   OUT      directory for the callgrind profiles (default: ${TMPDIR:-/tmp}); read one with
#            `callgrind_annotate --inclusive=yes OUT/callgrind.N.out | head -60`
set -euo pipefail

file="${1:?usage: benches/instructions.sh FILE [BINARY...]}"
shift
[ -r "$file" ] || { echo "cannot read $file" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-${TMPDIR:-/tmp}}"
read -r -a args <<<"${ARGS:-analyze --threads 1 --format json}"
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/target/release/pcapsleuth")

echo "| binary | instructions | ratio to the first |"
echo "|---|---:|---:|"
first=""
n=0
for b in "${bins[@]}"; do
    n=$((n + 1))
    prof="$out/callgrind.$n.out"
    log="$out/callgrind.$n.log"
    valgrind --tool=callgrind --callgrind-out-file="$prof" "$b" "${args[@]}" "$file" \
        >/dev/null 2>"$log" || { echo "$b failed, see $log" >&2; exit 1; }
    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log" | tail -1)
    [ -n "$first" ] || first="$ir"
    ratio=$(awk -v a="$ir" -v b="$first" 'BEGIN { printf "%.3f", a / b }')
    echo "| \`$b\` | $ir | ${ratio}× |"
done
