#!/usr/bin/env python3
"""Write a capture of many concurrent bulk TCP transfers, every segment acknowledged.

    python3 benches/gen-bulk.py OUT [FLOWS [SEGMENTS]]

FLOWS connections (default 500) from distinct 10.0.0.0/8 clients to 192.0.2.1:80 each do
a handshake, then SEGMENTS rounds (default 4,000): every client sends one 8-byte segment,
then the server acknowledges each. The defaults give 4,001,500 packets, 296 MB. It is the
shape `../shared/bench/gen-scale.py` lacks: long-lived flows whose per-stream state must
stay O(bytes in flight), not O(bytes sent). Bounded (writes exactly the packets above);
reuses gen-scale.py's packet builders.
"""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "gen_scale", os.path.join(here, "..", "..", "shared", "bench", "gen-scale.py"))
gs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gs)

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
segs = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
w = gs.W(out)
flows = [(0x0A000000 | (i + 1), 30000 + i, 1000 * i, 7000 * i) for i in range(n)]
for (src, sp, ci, si) in flows:
    w.pkt(gs.ETH + gs.ipv4(src, gs.S, 6, gs.tcp(sp, 80, ci, 0, gs.SYN, opts=gs.SYN_OPTS)))
    w.pkt(gs.ETH + gs.ipv4(gs.S, src, 6, gs.tcp(80, sp, si, ci + 1, gs.SYN | gs.ACK, opts=gs.SYN_OPTS)))
    w.pkt(gs.ETH + gs.ipv4(src, gs.S, 6, gs.tcp(sp, 80, ci + 1, si + 1, gs.ACK)))
for k in range(segs):
    for (src, sp, ci, si) in flows:
        seg = gs.tcp(sp, 80, ci + 1 + 8 * k, si + 1, gs.ACK | gs.PSH, b"d" * 8)
        w.pkt(gs.ETH + gs.ipv4(src, gs.S, 6, seg))
    for (src, sp, ci, si) in flows:
        w.pkt(gs.ETH + gs.ipv4(gs.S, src, 6, gs.tcp(80, sp, si + 1, ci + 9 + 8 * k, gs.ACK)))
w.f.close()
