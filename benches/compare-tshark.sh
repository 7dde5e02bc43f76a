#!/usr/bin/env bash
# Time `pcapsleuth analyze` against tshark on the same captures:
#   tshark -r F -q -z conv,tcp          (conversation table)
#   tshark -r F -T fields -e tcp.stream (per-packet stream ids)
# on the synthetic benchmark capture (generated into $TMPDIR, never the repo)
# and on ../shared/captures/derived__bench/*.pcap. Reports the median wall
# time of 3 runs (hyperfine if installed, else bash `time`) and MB/s.
#
# Usage: benches/compare-tshark.sh [MEGABYTES_OF_SYNTHETIC_CAPTURE]   (default 64)
# COMPARE_SHARED=0 skips the shared merge file (tshark needs minutes per run on it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="${TMPDIR:-/tmp}"
mb="${1:-64}"
runs=3

command -v tshark >/dev/null || { echo "tshark not installed" >&2; exit 1; }

echo "building release binaries..." >&2
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pcapsleuth -p pcapsleuth-benches
bin="$root/target/release"
cli="$bin/pcapsleuth"
[ -x "$cli" ] || { echo "no $cli (is the CLI binary named pcapsleuth?)" >&2; exit 1; }

synthetic="$tmp/pcapsleuth-compare-synthetic.pcap"
"$bin/gen-synthetic" "$synthetic" "$mb" >&2
files=("$synthetic")
if [ "${COMPARE_SHARED:-1}" != 0 ]; then
    for f in "$root"/../shared/captures/derived__bench/*.pcap; do
        [ -f "$f" ] && files+=("$f")
    done
fi

# median of the wall times (seconds) of $runs runs of "$@"
median_time() {
    if command -v hyperfine >/dev/null; then
        local json="$tmp/pcapsleuth-hyperfine.json"
        hyperfine -i --runs "$runs" --style none --export-json "$json" "$(printf '%q ' "$@") >/dev/null 2>&1" >/dev/null
        python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["results"][0]["median"])' "$json"
    else
        local times=()
        for _ in $(seq "$runs"); do
            local start end
            start=$(date +%s.%N)
            "$@" >/dev/null 2>&1 || true
            end=$(date +%s.%N)
            times+=("$(echo "$end - $start" | bc -l)")
        done
        printf '%s\n' "${times[@]}" | sort -g | sed -n "$(( (runs + 1) / 2 ))p" | xargs printf '%.3f\n'
    fi
}

printf '%-48s %-28s %10s %10s\n' "file" "tool" "median s" "MB/s"
for f in "${files[@]}"; do
    size_mb=$(echo "$(stat -c %s "$f") / 1048576" | bc -l)
    name=$(basename "$f")
    for tool in "pcapsleuth analyze" "tshark -z conv,tcp" "tshark -e tcp.stream"; do
        case "$tool" in
            "pcapsleuth analyze") t=$(median_time "$cli" analyze "$f") ;;
            "tshark -z conv,tcp") t=$(median_time tshark -n -r "$f" -q -z conv,tcp) ;;
            "tshark -e tcp.stream") t=$(median_time tshark -n -r "$f" -T fields -e tcp.stream) ;;
        esac
        printf '%-48s %-28s %10s %10.1f\n' "$name" "$tool" "$t" "$(echo "$size_mb / $t" | bc -l)"
    done
done
rm -f "$synthetic"
