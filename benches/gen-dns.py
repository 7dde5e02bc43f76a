#!/usr/bin/env python3
"""Write a capture of many DNS lookups over UDP, one in a hundred queries lost and re-sent.

    python3 benches/gen-dns.py OUT [LOOKUPS [HOURS [NAMES]]]

LOOKUPS lookups (default 1,000,000) spread evenly over HOURS (default 4) of capture time: a
client of 192.0.2.1-250 asks 203.0.113.53:53 for the A record of one of 50,000 names, from a
random port with a random id, and gets the answer 0.8-21 ms later. NAMES 0 gives every lookup a
name of its own (`<k>.flood.example.test`: a random-subdomain flood, "DNS water torture"). One query in a hundred
(random.Random(5): 10,218 with the defaults) gets no answer and is re-sent with the same id
5 s later (glibc's default timeout), then answered. The defaults give 2,010,218 packets,
207 MB, at 140 messages a second; `1000000 0.1667` packs them into 10 minutes (3,350 a
second, more than `dns-timeout`'s chunk holds in its 80 s settle time). It is the shape
`../shared/bench/gen-scale.py` lacks: a capture far above one chunk of DNS messages
(`pcapsleuth_dns_timeout::CHUNK_MESSAGES`), whose every lost query must still be found.
Bounded (writes exactly the packets above); Ethernet, IPv4, no checksum on UDP.
"""
import random
import struct
import sys

out = sys.argv[1]
lookups = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
hours = float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
names = int(sys.argv[4]) if len(sys.argv) > 4 else 50_000
rng = random.Random(5)
GLOBAL_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
ETH = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
RESOLVER = 0xCB007135  # 203.0.113.53


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ipv4_udp(src, dst, sport, dport, data):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    h = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, src, dst)
    return h[:10] + struct.pack("!H", checksum(h)) + h[12:] + udp


def dns(ident, name, response):
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack("!HH", 1, 1)
    if response:
        answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + b"\xcb\x00\x71\x07"
        return struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + q + answer
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + q


events = []
t0 = 1_700_000_000_000_000  # µs
span = int(hours * 3600e6)
for k in range(lookups):
    t = t0 + k * span // lookups
    client = 0xC0000200 | (1 + k % 250)
    port = 1024 + rng.randrange(60000)
    ident = rng.randrange(65536)
    name = "h%d.example.test" % rng.randrange(names) if names > 0 else "%d.flood.example.test" % k
    query = ETH + ipv4_udp(client, RESOLVER, port, 53, dns(ident, name, False))
    answer = ETH + ipv4_udp(RESOLVER, client, 53, port, dns(ident, name, True))
    if rng.random() < 0.01:
        events.append((t, query))
        t += 5_000_000
    events.append((t, query))
    events.append((t + 800 + rng.randrange(20000), answer))
events.sort(key=lambda e: e[0])
with open(out, "wb", buffering=1 << 22) as f:
    f.write(GLOBAL_HEADER)
    for t, p in events:
        f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(p), len(p)) + p)
