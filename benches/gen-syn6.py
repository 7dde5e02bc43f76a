#!/usr/bin/env python3
"""Write a SYN scan from IPv6 sources: `../shared/bench/gen-scale.py`'s `syn2m` with IPv6.

    python3 benches/gen-syn6.py OUT [FLOWS]

FLOWS one-SYN TCP flows (default 2,000,000), 1 µs apart, each from its own source address
2001:db8:0:1:<48 bits> and a random port (random.Random(1)) to [2001:db8::1]:80, with the
options Linux puts in a SYN (MSS 1460, SACK permitted, timestamps, window scale 7). The
defaults give 220 MB. `syn2m` scans from IPv4 addresses only; an IPv6 stream's endpoints do
not fit the packed IPv4 records, so the per-flow cost of this one is what issue 11's
"≤ 256 bytes per idle one-packet flow" must also hold for (see README, "Scale").
Bounded (writes exactly FLOWS packets); Ethernet, no TCP checksum.
"""
import random
import struct
import sys

out = sys.argv[1]
flows = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
rng = random.Random(1)
GLOBAL_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
RECORD = struct.Struct("<IIII")
ETH6 = bytes.fromhex("020000000002" "020000000001" "86dd")
DST = bytes.fromhex("20010db8000000000000000000000001")
TCP = struct.Struct("!HHIIBBHHH")
SYN_OPTS = bytes.fromhex("020405b4" "0402" "080a00000001" "00000000" "01" "030307")
SYN = 0x02

with open(out, "wb", buffering=1 << 22) as f:
    f.write(GLOBAL_HEADER)
    t = 1_700_000_000_000_000  # µs
    for i in range(flows):
        src = bytes.fromhex("20010db8") + struct.pack("!IQ", 1, (i * 2654435761) & 0xFFFFFFFFFFFF)
        sport = rng.randrange(1024, 65536)
        seq = rng.randrange(1 << 32)
        tcp = TCP.pack(sport, 80, seq, 0, (20 + len(SYN_OPTS)) // 4 << 4, SYN, 65535, 0, 0) + SYN_OPTS
        ip6 = struct.pack("!IHBB", 0x60000000, len(tcp), 6, 64) + src + DST + tcp
        frame = ETH6 + ip6
        t += 1
        f.write(RECORD.pack(t // 1_000_000, t % 1_000_000, len(frame), len(frame)) + frame)
