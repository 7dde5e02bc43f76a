#!/usr/bin/env python3
"""Build seed corpora for the cargo-fuzz targets from capture files.

    fuzz/scripts/make_seeds.py OUT_DIR CAPTURE_OR_DIR...

writes OUT_DIR/<target>/<name> for the five targets:

- ingest, pipeline: each capture's first 16 KiB (pipeline: 64 KiB);
- decode: the selector byte of the link type + one frame, the first 16
  frames of each capture;
- pcapng_options: each pcapng file (first 64 blocks) converted to the block
  description format of fuzz_targets/pcapng_options.rs;
- merge: pairs and triples of captures (first 8 KiB each) joined with the
  separator of fuzz_targets/merge.rs.

Only the standard library; files that are not captures are skipped.
"""
import hashlib
import os
import struct
import sys

DECODE_LINKTYPES = [0, 1, 12, 101, 108, 113, 228, 229, 276, 147]
MERGE_SEP = b"\xffPCAPSLEUTH-MERGE\xff"
PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",
               b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}


def pcap_frames(d):
    e = PCAP_MAGICS[d[:4]]
    lt = struct.unpack(e + "I", d[20:24])[0] & 0xFFFF
    off = 24
    while off + 16 <= len(d):
        incl = struct.unpack(e + "I", d[off + 8:off + 12])[0]
        yield lt, d[off + 16:off + 16 + incl]
        off += 16 + incl


def ng_blocks(d):
    """(endian, type, body) for each block; stops at the first bad one."""
    off, e = 0, "<"
    while off + 12 <= len(d):
        if d[off:off + 4] == b"\x0a\x0d\x0d\x0a":
            e = "<" if d[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        btype, blen = struct.unpack(e + "II", d[off:off + 8])
        if blen < 12 or off + blen > len(d):
            return
        yield e, btype, d[off + 8:off + blen - 4]
        off += blen


def ng_frames(d):
    lts = []
    for e, t, b in ng_blocks(d):
        if t == 0x0A0D0D0A:
            lts = []
        elif t == 1 and len(b) >= 2:
            lts.append(struct.unpack(e + "H", b[:2])[0])
        elif t == 6 and len(b) >= 20:
            iface, _, _, cap = struct.unpack(e + "IIII", b[:16])
            if iface < len(lts):
                yield lts[iface], b[20:20 + cap]
        elif t == 3 and lts:
            yield lts[0], b[4:]


def options(e, b):
    opts, off = [], 0
    while off + 4 <= len(b) and len(opts) < 255:
        code, n = struct.unpack(e + "HH", b[off:off + 4])
        v = b[off + 4:off + 4 + n][:255]
        opts.append(struct.pack("<HB", code, len(v)) + v)
        off += 4 + n + (4 - n % 4) % 4
        if code == 0:
            break
    return bytes([len(opts)]) + b"".join(opts)


def data(v):
    v = v[:0xFFFF]
    return struct.pack("<H", len(v)) + v


def ng_ops(d, max_blocks=64):
    out = []
    for e, t, b in ng_blocks(d):
        if len(out) >= max_blocks:
            break
        u = lambda fmt, at: struct.unpack(e + fmt, b[at:at + struct.calcsize(fmt)])
        try:
            if t == 0x0A0D0D0A:
                major, minor = u("HH", 4)
                seclen = u("q", 8)[0]
                flags = (e == ">") | (((major, minor) != (1, 0)) << 1) | ((seclen != -1) << 2)
                op = bytes([0, flags])
                if flags & 2:
                    op += struct.pack("<HH", major, minor)
                if flags & 4:
                    op += struct.pack("<q", seclen)
                op += options(e, b[16:])
            elif t == 1:
                lt, _, snap = u("HHI", 0)
                op = bytes([1]) + struct.pack("<HI", lt, snap) + options(e, b[8:])
            elif t == 6:
                iface, hi, lo, cap, orig = u("IIIII", 0)
                pad = cap + (4 - cap % 4) % 4
                pkt = b[20:20 + cap]
                flags = int(len(pkt) != cap)
                op = bytes([2, flags]) + struct.pack("<IIII", iface, hi, lo, orig)
                if flags:
                    op += struct.pack("<I", cap)
                op += data(pkt) + options(e, b[20 + pad:])
            elif t == 3:
                op = bytes([3]) + struct.pack("<I", u("I", 0)[0]) + data(b[4:])
            elif t == 5:
                op = bytes([4]) + struct.pack("<III", *u("III", 0)) + options(e, b[12:])
            elif t == 2:
                iface, drops, hi, lo, cap, orig = u("HHIIII", 0)
                pad = cap + (4 - cap % 4) % 4
                op = (bytes([5]) + struct.pack("<HHIII", iface, drops, hi, lo, orig)
                      + data(b[20:20 + cap]) + options(e, b[20 + pad:]))
            else:
                op = bytes([6]) + struct.pack("<I", t) + data(b)
        except struct.error:
            break
        out.append(op)
    return b"".join(out)


def frames(d):
    try:
        if d[:4] in PCAP_MAGICS:
            return list(pcap_frames(d))
        if d[:4] == b"\x0a\x0d\x0d\x0a":
            return list(ng_frames(d))
    except struct.error:
        pass
    return []


def is_capture(d):
    return d[:4] in PCAP_MAGICS or d[:4] == b"\x0a\x0d\x0d\x0a"


def put(out, target, content):
    if not content:
        return
    name = hashlib.sha1(content).hexdigest()
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(content)


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    paths = []
    for p in inputs:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                paths += [os.path.join(root, f) for f in sorted(files)]
        else:
            paths.append(p)
    heads = []
    for p in sorted(paths):
        with open(p, "rb") as f:
            d = f.read(1 << 20)
        if not is_capture(d):
            continue
        put(out, "ingest", d[:16384])
        put(out, "pipeline", d[:65536])
        heads.append(d[:8192])
        for lt, fr in frames(d)[:16]:
            if lt in DECODE_LINKTYPES:
                put(out, "decode", bytes([DECODE_LINKTYPES.index(lt)]) + fr)
        if d[:4] == b"\x0a\x0d\x0d\x0a":
            put(out, "pcapng_options", ng_ops(d))
    for i in range(len(heads)):
        a, b, c = heads[i], heads[(i + 1) % len(heads)], heads[(i * 7 + 3) % len(heads)]
        put(out, "merge", b"\x00" + a + MERGE_SEP + b)
        if i % 3 == 0:
            put(out, "merge", b"\x01" + a + MERGE_SEP + b + MERGE_SEP + c)


if __name__ == "__main__":
    main()
