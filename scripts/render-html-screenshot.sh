#!/usr/bin/env bash
# Render HTML reports and screenshot them with headless Chromium, to look at
# the SVG graphs. Output goes outside the repository only (default
# /tmp/pcapsleuth-shots, override with OUT_DIR).
#
# Usage:
#   scripts/render-html-screenshot.sh            one report per detector, from
#                                                its fixture or lab capture, plus
#                                                a multi-capture report; each at
#                                                1200 px and at 800 px wide
#   scripts/render-html-screenshot.sh CAPTURE... one report of these captures
# Environment: OUT_DIR, WINDOW_SIZE (default 1200,2400), HEIGHT (default 2400).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out_dir="${OUT_DIR:-/tmp/pcapsleuth-shots}"
case "$out_dir" in "$root"|"$root"/*) echo "refusing to write into the repository" >&2; exit 2;; esac
mkdir -p "$out_dir"
shared="${PCAPSLEUTH_SHARED:-$root/../shared}"
height="${HEIGHT:-2400}"

cargo build --quiet --manifest-path "$root/Cargo.toml" -p pcapsleuth-html --example html_report
report_bin="$root/target/debug/examples/html_report"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "installing chromium (Debian package)" >&2
    apt-get install -y chromium >/dev/null
    browser="$(command -v chromium)"
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT

# shot NAME WIDTH,HEIGHT HTML: one PNG of the top of the page.
shot() {
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --hide-scrollbars --user-data-dir="$profile" --screenshot="$out_dir/$1.png" \
        --window-size="$2" "file://$3" 2>/dev/null
    echo "$out_dir/$1.png"
}

# render NAME CAPTURE...: the report and its screenshots.
render() {
    local name="$1"; shift
    for c in "$@"; do
        if [ ! -f "$c" ]; then echo "skip $name: $c missing" >&2; return 0; fi
    done
    local html="$out_dir/$name.html"
    "$report_bin" "$@" -o "$html"
    echo "$html"
    shot "$name" "${WINDOW_SIZE:-1200,$height}" "$html"
    shot "$name-800" "800,$height" "$html"
}

if [ "$#" -gt 0 ]; then
    render report "$@"
    exit 0
fi
fx="$root/fixtures/captures"
render syn-retransmit "$fx/syn-drops.pcap"
render mss-blackhole "$fx/mss-blackhole.pcap"
render frag-needed "$fx/self-frag-needed.pcapng"
render zero-window "$fx/zero-window.pcap"
render missing-zero-window "$shared/lab/missing-zero-window-6.1.pcap"
render probe-timer-stall "$shared/lab/probe-timer-200ms.pcapng"
render cross-interface-loss "$fx/cross-interface-loss.pcapng"
render dns-timeout "$fx/dns-timeout-any.pcapng"
render dual-stack-latency "$shared/lab-incoming/dual-stack-latency.pcap"
render window-retraction "$shared/lab-incoming/window-retraction.pcap"
render delayed-ack-stall "$shared/lab-incoming/delayed-ack-stall.pcap"
render multi-capture "$fx/syn-drops.pcap" "$fx/mss-blackhole.pcap" "$fx/zero-window.pcap"
