#!/usr/bin/env bash
# Render the HTML report of a capture (default fixtures/captures/mss-blackhole.pcap)
# and screenshot it with headless Chromium, for eyeballing the SVG graphs.
# Output goes to /tmp only: /tmp/pcapsleuth-report.html and /tmp/pcapsleuth-report.png
# (override with OUT_DIR). Usage: scripts/render-html-screenshot.sh [CAPTURE...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out_dir="${OUT_DIR:-/tmp}"
case "$out_dir" in "$root"|"$root"/*) echo "refusing to write into the repository" >&2; exit 2;; esac
if [ "$#" -eq 0 ]; then set -- "$root/fixtures/captures/mss-blackhole.pcap"; fi
html="$out_dir/pcapsleuth-report.html"
png="$out_dir/pcapsleuth-report.png"

cargo run --quiet --manifest-path "$root/Cargo.toml" -p pcapsleuth-html --example html_report -- "$@" -o "$html"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "installing chromium (Debian package)" >&2
    apt-get install -y chromium >/dev/null
    browser="$(command -v chromium)"
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --screenshot="$png" --window-size="${WINDOW_SIZE:-1400,2400}" \
    "file://$html" 2>/dev/null
echo "$html"
echo "$png"
