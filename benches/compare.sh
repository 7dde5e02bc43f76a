#!/usr/bin/env bash
# Time pcapsleuth against the floor and against other analyzers on the SAME file in the SAME run:
#
#   pcapsleuth   pcapsleuth analyze --format json FILE            (every detector)
#   pcapsleuth   the same with --threads 1                        (THREADS1=0 skips it)
#   parse-limit  ../shared/bench/parse-limit stream FILE --flows  (the floor: parse + a 5-tuple HashMap)
#   tcptrace     tcptrace -l -n FILE                              (if installed)
#   tshark       tshark -n -q -z expert -r FILE                   (if installed; TSHARK=0 skips it)
#
# The programs are alternated (round r runs each program once, in the order above), so load
# from other work on the machine hits all of them alike; the page cache is warmed by one
# untimed read of the file first. Each run is measured with `/usr/bin/time -f '%e %M'`
# (wall seconds, peak RSS in KiB). The table shows the median of N runs (default 3) of each,
# and the ratio of wall time and RSS to parse-limit.
#
# Usage: benches/compare.sh FILE [N]
# Environment:
#   PCAPSLEUTH   pcapsleuth binary (default: target/release/pcapsleuth, built with cargo if missing
#                or BUILD=1)
#   PARSE_LIMIT  parse-limit binary (default: built from ../shared/bench/parse-limit into
#                ${TMPDIR:-/tmp}/pcapsleuth-parse-limit, the shared folder may be read-only)
#   TSHARK=0     skip tshark (it needs minutes and GBs on a 1 GB file)
#   THREADS1=0   skip the `--threads 1` run of pcapsleuth
#   EXTRA='--threads 1'  extra arguments for pcapsleuth analyze
set -euo pipefail

file="${1:?usage: benches/compare.sh FILE [N]}"
runs="${2:-3}"
[ -r "$file" ] || { echo "cannot read $file" >&2; exit 1; }
[ "$runs" -ge 1 ] 2>/dev/null || { echo "N must be a positive integer" >&2; exit 1; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="${TMPDIR:-/tmp}"
timebin=/usr/bin/time
[ -x "$timebin" ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

# --- binaries -----------------------------------------------------------------------------
ps_bin="${PCAPSLEUTH:-$root/target/release/pcapsleuth}"
if [ -z "${PCAPSLEUTH:-}" ] && { [ "${BUILD:-0}" = 1 ] || [ ! -x "$ps_bin" ]; }; then
    echo "building pcapsleuth (release)..." >&2
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pcapsleuth >&2
fi
[ -x "$ps_bin" ] || { echo "no pcapsleuth binary at $ps_bin" >&2; exit 1; }

pl_bin="${PARSE_LIMIT:-}"
if [ -z "$pl_bin" ]; then
    src="$root/../shared/bench/parse-limit"
    dst="$tmp/pcapsleuth-parse-limit"
    pl_bin="$dst/target/release/parse-limit"
    if [ ! -x "$pl_bin" ] && [ -d "$src" ]; then
        echo "building parse-limit into $dst..." >&2
        mkdir -p "$dst"
        cp -r "$src/Cargo.toml" "$src/Cargo.lock" "$src/src" "$dst/"
        cargo build --release --quiet --manifest-path "$dst/Cargo.toml" >&2
    fi
fi

names=() cmds=()
add() { names+=("$1"); shift; cmds+=("$(printf '%q ' "$@")"); }
# shellcheck disable=SC2086  # EXTRA is split on purpose
add "pcapsleuth analyze --format json${EXTRA:+ $EXTRA}" "$ps_bin" analyze --format json ${EXTRA:-} "$file"
# The same on one thread (the default uses every CPU: one file runs the staged pipeline).
if [ "${THREADS1:-1}" != 0 ]; then
    # shellcheck disable=SC2086
    add "pcapsleuth analyze --format json --threads 1${EXTRA:+ $EXTRA}" "$ps_bin" analyze --format json --threads 1 ${EXTRA:-} "$file"
fi
if [ -x "$pl_bin" ]; then
    add "parse-limit stream --flows" "$pl_bin" stream "$file" --flows
else
    echo "parse-limit not available: no ratios" >&2
fi
command -v tcptrace >/dev/null && add "tcptrace -l -n" tcptrace -l -n "$file"
if [ "${TSHARK:-1}" != 0 ] && command -v tshark >/dev/null; then
    add "tshark -q -z expert" tshark -n -q -z expert -r "$file"
fi

# --- runs ---------------------------------------------------------------------------------
out="$(mktemp -d "$tmp/pcapsleuth-compare.XXXXXX")"
trap 'rm -rf "$out"' EXIT
cat "$file" >/dev/null   # warm the page cache
for r in $(seq "$runs"); do
    for i in "${!names[@]}"; do
        # stdout/stderr of the program go to /dev/null; time writes its line to its own file
        if ! eval "$timebin -o $out/$i.$r -f '%e %M' ${cmds[$i]}" >/dev/null 2>&1; then
            echo "warning: ${names[$i]} exited non-zero in run $r" >&2
        fi
        tail -n 1 "$out/$i.$r" >>"$out/$i"
        echo "run $r: ${names[$i]}: $(tail -n 1 "$out/$i.$r")" >&2
    done
done

# --- table --------------------------------------------------------------------------------
python3 - "$file" "$runs" "$out" "${names[@]}" <<'PY'
import os, statistics, sys
path, runs, out, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
rows = []
for i, name in enumerate(names):
    wall, rss = [], []
    for line in open(os.path.join(out, str(i))):
        parts = line.split()
        if len(parts) == 2:
            wall.append(float(parts[0])); rss.append(int(parts[1]))
    rows.append((name, statistics.median(wall), statistics.median(rss) / 1024, wall))
base = next((r for r in rows if r[0].startswith("parse-limit")), None)
size = os.path.getsize(path)
print(f"file: {path} ({size / 1e6:.0f} MB), median of {runs} alternating runs")
print()
print("| program | wall s (median) | runs | peak RSS MiB | wall ÷ parse-limit | RSS ÷ parse-limit |")
print("|---|---:|---|---:|---:|---:|")
for name, wall, rss, all_wall in rows:
    ratio = f"{wall / base[1]:.2f}×" if base and base[1] > 0 else "–"
    rratio = f"{rss / base[2]:.0f}×" if base and base[2] > 0 else "–"
    runs_s = " ".join(f"{w:.2f}" for w in all_wall)
    print(f"| `{name}` | {wall:.2f} | {runs_s} | {rss:.0f} | {ratio} | {rratio} |")
PY
