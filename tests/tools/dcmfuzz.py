#!/usr/bin/env python3
"""dcmfuzz: a seeded mutation fuzzer for ldctd's network input.

Takes valid Part 10 instances (from mkseries), mutates their dataset bytes
or the upper-layer PDUs that carry them, sends each mutant to one running
ldctd over its own association and checks after every send that the daemon
still answers C-ECHO promptly. Every instance answered 0x0000 is remembered
so that --state can prove it was stored, byte for byte as sent.

    dcmfuzz.py HOST PORT SEEDDIR... [--seed N] [--iterations N]
               [--pdu-iterations N] [--seconds S] [--state DIR] [--pid PID]
               [--save DIR] [--echo-limit S] [--wait S] [-v]

SEEDDIR holds IMG*.dcm of one series in one transfer syntax (mkseries
--ts ...). Dataset mutations (several may apply to one mutant): bit flips,
byte runs, inserted or deleted bytes, element lengths set to huge, odd,
undefined or wrong values, VRs changed, elements duplicated, moved out of
order or removed, pixel data shortened or lengthened, sequences inserted
(deep, with delimiters removed, doubled or misplaced), image attributes
(rows, columns, bits, frames, rescale, charset) set to extreme values,
the dataset cut short, and the bytes sent under another transfer syntax
than they are encoded in. A sixth of the associations carry two or three
instances, some of them unmutated after a mutated one (which must then be
answered 0x0000 when the one before got a status). PDU mutations:
A-ASSOCIATE-RQ fields and items (also hundreds of presentation contexts
and odd user information sub-items), P-DATA PDU and PDV headers, PDUs out
of order, bytes after the dataset.
An instance answered 0x0000 whose only mutation was an invalid Study or
Series Instance UID is a failure (ingest must refuse it).

--pid makes every send also check that the daemon process is alive.
With --state DIR (the daemon's state_dir) it checks at the end that every
acknowledged instance has its row in DIR/ldct.db and its file holds the
dataset exactly as sent. Prints one summary (outcome counts per mutation
kind) and exits 0 when the daemon survived every send, answered every
echo within --echo-limit seconds and lost nothing acknowledged; 1
otherwise. Deterministic for a given --seed and seed files (except for the
daemon's timing). Single-threaded but for one echo-latency probe thread.
"""
import argparse
import collections
import os
import random
import socket
import sqlite3
import struct
import sys
import threading
import time
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawscu  # noqa: E402  (the shared upper-layer helpers)

VERIFICATION = b"1.2.840.10008.1.1"
TS = {
    "implicit": "1.2.840.10008.1.2",
    "explicit": "1.2.840.10008.1.2.1",
    "big": "1.2.840.10008.1.2.2",
    "deflate": "1.2.840.10008.1.2.1.99",
    "jpegll": "1.2.840.10008.1.2.4.70",
    "jpegls": "1.2.840.10008.1.2.4.80",
    "rle": "1.2.840.10008.1.2.5",
}
TS_BY_UID = {v: k for k, v in TS.items()}
LONG_VRS = (b"OB", b"OD", b"OF", b"OL", b"OV", b"OW", b"SQ", b"SV", b"UC", b"UN", b"UR", b"UT",
            b"UV")
ALL_VRS = [b"AE", b"AS", b"AT", b"CS", b"DA", b"DS", b"DT", b"FL", b"FD", b"IS", b"LO", b"LT",
           b"OB", b"OD", b"OF", b"OL", b"OW", b"PN", b"SH", b"SL", b"SQ", b"SS", b"ST", b"TM",
           b"UC", b"UI", b"UL", b"UN", b"UR", b"US", b"UT", b"ZZ", b"\0\0", b"\xff\xff"]
# Implicit VR needs the VR of the attributes we rewrite by value.
IMAGE_US = [(0x0028, 0x0002), (0x0028, 0x0010), (0x0028, 0x0011), (0x0028, 0x0100),
            (0x0028, 0x0101), (0x0028, 0x0102), (0x0028, 0x0103)]
IMAGE_STR = [(0x0028, 0x0008), (0x0028, 0x1052), (0x0028, 0x1053), (0x0020, 0x0032),
             (0x0020, 0x0037), (0x0028, 0x0030), (0x0018, 0x0050), (0x0008, 0x0005),
             (0x0028, 0x0004), (0x0008, 0x0060), (0x0020, 0x0013), (0x0028, 0x0120)]
US_EXTREMES = [0, 1, 2, 3, 7, 8, 12, 15, 16, 17, 31, 32, 33, 64, 255, 256, 0x7FFF, 0x8000,
               0xFFFE, 0xFFFF]
STR_EXTREMES = [b"", b"-1", b"0", b"2147483647", b"2147483648", b"-2147483649", b"1e308",
                b"1e400", b"-1e400", b"nan", b"NaN", b"inf", b"-inf", b"1\\2\\3\\4\\5\\6\\7",
                b"\\\\\\", b" ", b"1" * 64, b"9" * 400, b"ISO 2022 IR 87\\ISO_IR 192",
                b"ISO_IR 999", b"\x1b$B\x1b(B", b"\xff\xfe\x00", b"MONOCHROME3", b"RGB",
                b"PALETTE COLOR", b"YBR_FULL_422", b"0.0\\0.0", b"-0", b"1e-320"]
UID_TAGS = [(0x0008, 0x0016), (0x0008, 0x0018), (0x0020, 0x000D), (0x0020, 0x000E)]
PHI_MARKERS = [b"FUZZPHI", b"PHIMARK"]

# ---- dataset parsing --------------------------------------------------------


class Elem:
    """One top-level element: where it starts and ends in the buffer."""

    def __init__(self, start, tag, vr, hdr, vlen, end):
        self.start, self.tag, self.vr, self.hdr, self.vlen, self.end = \
            start, tag, vr, hdr, vlen, end


def fmt_of(kind):
    if kind == "implicit":
        return "ile"
    if kind == "big":
        return "ebe"
    return "ele"


def read_tag(buf, i, fmt):
    e = ">" if fmt == "ebe" else "<"
    g, el = struct.unpack(e + "HH", buf[i:i + 4])
    return g, el


def skip_undefined(buf, i, fmt):
    """End of an undefined-length value starting at i (after the header)."""
    e = ">" if fmt == "ebe" else "<"
    depth = 1
    while i + 8 <= len(buf):
        g, el = read_tag(buf, i, fmt)
        n = struct.unpack(e + "I", buf[i + 4:i + 8])[0]
        if g == 0xFFFE:
            i += 8
            if el == 0xE0DD or el == 0xE00D:
                depth -= 1
                if depth == 0:
                    return i
            elif el == 0xE000:
                if n == 0xFFFFFFFF:
                    depth += 1
                else:
                    i += n
            continue
        # An element inside an item.
        el_ = parse_one(buf, i, fmt)
        if el_ is None:
            return len(buf)
        i = el_.end
    return len(buf)


def parse_one(buf, i, fmt):
    if i + 8 > len(buf):
        return None
    e = ">" if fmt == "ebe" else "<"
    tag = read_tag(buf, i, fmt)
    if fmt == "ile":
        vr, hdr = None, 8
        n = struct.unpack(e + "I", buf[i + 4:i + 8])[0]
    else:
        vr = buf[i + 4:i + 6]
        if vr in LONG_VRS:
            if i + 12 > len(buf):
                return None
            n, hdr = struct.unpack(e + "I", buf[i + 8:i + 12])[0], 12
        else:
            n, hdr = struct.unpack(e + "H", buf[i + 6:i + 8])[0], 8
    if n == 0xFFFFFFFF:
        end = skip_undefined(buf, i + hdr, fmt)
    else:
        end = i + hdr + n
    if end > len(buf):
        return None
    return Elem(i, tag, vr, hdr, n, end)


def parse(buf, fmt):
    out, i = [], 0
    while i < len(buf):
        el = parse_one(buf, i, fmt)
        if el is None:
            break
        out.append(el)
        i = el.end
    return out


def encode(tag, vr, value, fmt):
    """One element in fmt (vr is ignored for implicit VR)."""
    e = ">" if fmt == "ebe" else "<"
    if len(value) % 2:
        value += b"\0" if vr == b"UI" else b" "
    head = struct.pack(e + "HH", *tag)
    if fmt == "ile":
        return head + struct.pack(e + "I", len(value)) + value
    if vr in LONG_VRS:
        return head + vr + b"\0\0" + struct.pack(e + "I", len(value)) + value
    return head + vr + struct.pack(e + "H", len(value) & 0xFFFF) + value


def set_value(buf, fmt, tag, vr, value):
    """buf with tag's value replaced (or the element inserted in order)."""
    els = parse(buf, fmt)
    new = encode(tag, vr, value, fmt)
    for el in els:
        if el.tag == tag:
            return buf[:el.start] + new + buf[el.end:]
        if el.tag > tag:
            return buf[:el.start] + new + buf[el.start:]
    return buf + new


def get_value(buf, fmt, tag):
    for el in parse(buf, fmt):
        if el.tag == tag and el.vlen != 0xFFFFFFFF:
            return buf[el.start + el.hdr:el.end]
    return None


# ---- seeds ------------------------------------------------------------------


class Seed:
    def __init__(self, path):
        raw = open(path, "rb").read()
        assert raw[128:132] == b"DICM", path
        meta_len = struct.unpack("<I", raw[140:144])[0]
        meta = raw[144:144 + meta_len]
        ts = get_value(meta, "ele", (0x0002, 0x0010)).rstrip(b"\0 ").decode()
        self.kind = TS_BY_UID[ts]
        self.path = path
        body = raw[144 + meta_len:]
        if self.kind == "deflate":
            body = zlib.decompress(body, -15)
        self.fmt = fmt_of(self.kind)
        # Patient data we can look for in the log.
        body = set_value(body, self.fmt, (0x0010, 0x0010), b"PN", b"FUZZPHI^NAME")
        body = set_value(body, self.fmt, (0x0010, 0x0020), b"LO", b"PHIMARK-ID-42")
        body = set_value(body, self.fmt, (0x0010, 0x0030), b"DA", b"19010101")
        self.body = body  # uncompressed dataset (explicit LE for deflate)


def with_uids(seed, sop, series):
    b = set_value(seed.body, seed.fmt, (0x0008, 0x0018), b"UI", sop)
    return set_value(b, seed.fmt, (0x0020, 0x000E), b"UI", series)


# ---- dataset mutations -------------------------------------------------------


def m_bitflip(r, b, seed):
    b = bytearray(b)
    for _ in range(r.randint(1, 8)):
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    return bytes(b)


def m_byterun(r, b, seed):
    i = r.randrange(len(b))
    n = r.choice([1, 2, 4, 8, 16, 64, 300])
    fill = r.choice([b"\0", b"\xff", b"\x7f", b"\x80", None])
    run = bytes(r.randrange(256) for _ in range(n)) if fill is None else fill * n
    return b[:i] + run + b[i + n:]


def m_insdel(r, b, seed):
    i = r.randrange(len(b))
    if r.random() < 0.5:
        return b[:i] + bytes(r.randrange(256) for _ in range(r.randint(1, 12))) + b[i:]
    return b[:i] + b[i + r.randint(1, 12):]


def pick_elem(r, b, seed, pred=None):
    els = [e for e in parse(b, seed.fmt) if pred is None or pred(e)]
    return r.choice(els) if els else None


def m_length(r, b, seed):
    el = pick_elem(r, b, seed)
    if el is None:
        return b
    e = ">" if seed.fmt == "ebe" else "<"
    long_ = el.hdr == 12 or seed.fmt == "ile"
    at = el.start + (4 if seed.fmt == "ile" else 8 if el.hdr == 12 else 6)
    if long_:
        n = r.choice([0xFFFFFFFF, 0xFFFFFFFE, 0x7FFFFFFF, 0x80000000, 0, 1,
                      el.vlen + 1, el.vlen - 1, el.vlen * 2 + 2, len(b), len(b) + 1, 0x10000])
        return b[:at] + struct.pack(e + "I", n & 0xFFFFFFFF) + b[at + 4:]
    n = r.choice([0xFFFF, 0xFFFE, 0, 1, el.vlen + 1, el.vlen - 1, el.vlen + 8, 0x8000])
    return b[:at] + struct.pack(e + "H", n & 0xFFFF) + b[at + 2:]


def m_vr(r, b, seed):
    if seed.fmt == "ile":
        return m_length(r, b, seed)
    el = pick_elem(r, b, seed)
    if el is None:
        return b
    return b[:el.start + 4] + r.choice(ALL_VRS) + b[el.start + 6:]


def m_duplicate(r, b, seed):
    el = pick_elem(r, b, seed)
    if el is None:
        return b
    chunk = b[el.start:el.end]
    if r.random() < 0.5:
        return b[:el.end] + chunk + b[el.end:]  # twice in a row
    # A copy with another value of the same length at the end or the start.
    copy = bytearray(chunk)
    if len(copy) > el.hdr:
        copy[-1] = ord("7") if copy[-1] != ord("7") else ord("8")
    return (b + bytes(copy)) if r.random() < 0.5 else (bytes(copy) + b)


def m_order(r, b, seed):
    els = parse(b, seed.fmt)
    if len(els) < 2:
        return b
    i, j = sorted(r.sample(range(len(els)), 2))
    a, c = els[i], els[j]
    return (b[:a.start] + b[c.start:c.end] + b[a.end:c.start] + b[a.start:a.end] + b[c.end:])


def m_remove(r, b, seed):
    el = pick_elem(r, b, seed)
    return b if el is None else b[:el.start] + b[el.end:]


def m_pixels(r, b, seed):
    el = pick_elem(r, b, seed, lambda e: e.tag == (0x7FE0, 0x0010))
    if el is None:
        return b
    what = r.randrange(5)
    if what == 0:  # cut the tail, length kept
        return b[:el.end - r.randint(1, max(1, el.end - el.start - el.hdr))]
    if what == 1:  # extra bytes after, length kept
        return b + bytes(r.randrange(256) for _ in range(r.choice([1, 2, 7, 512, 5000])))
    if el.vlen == 0xFFFFFFFF:  # encapsulated: break its items
        body = b[el.start + el.hdr:el.end]
        choice = r.randrange(4)
        if choice == 0:
            body = body[:-8]  # no sequence delimiter
        elif choice == 1:
            body = body.replace(b"\xfe\xff\x00\xe0", b"\xfe\xff\xdd\xe0", 1)
        elif choice == 2:
            body = body[:8] + body[16:]  # first fragment's header gone
        else:
            body = struct.pack("<HHI", 0xFFFE, 0xE000, 0xFFFFFFF0) + body
        return b[:el.start + el.hdr] + body + b[el.end:]
    # Native: a consistent but different length (shorter, longer, odd, zero).
    e = ">" if seed.fmt == "ebe" else "<"
    val = b[el.start + el.hdr:el.end]
    new = r.choice([val[:len(val) // 2], val + val, val[:-1], b"", val[:2], val * 8])
    if seed.fmt == "ile":
        head = b[el.start:el.start + 4] + struct.pack(e + "I", len(new))
    else:
        head = b[el.start:el.start + 8] + struct.pack(e + "I", len(new))
    return b[:el.start] + head + new + b[el.end:]


def sequence(r, fmt, depth, broken):
    """A nest of `depth` Referenced Image Sequences of undefined length;
    `broken` removes, doubles or misplaces delimiters."""
    e = ">" if fmt == "ebe" else "<"

    def head(tag, n):
        if fmt == "ile":
            return struct.pack(e + "HHI", tag[0], tag[1], n)
        return struct.pack(e + "HH", *tag) + b"SQ\0\0" + struct.pack(e + "I", n)

    item = lambda n: struct.pack(e + "HHI", 0xFFFE, 0xE000, n)  # noqa: E731
    item_end = struct.pack(e + "HHI", 0xFFFE, 0xE00D, 0)
    seq_end = struct.pack(e + "HHI", 0xFFFE, 0xE0DD, 0)
    leaf = encode((0x0008, 0x1150), b"UI", b"1.2.840.10008.5.1.4.1.1.2", fmt)
    out = b""
    for _ in range(depth):
        out += head((0x0008, 0x1140), 0xFFFFFFFF) + item(0xFFFFFFFF)
    out += leaf
    closing = (item_end + seq_end) * depth
    if broken == "drop":
        k = r.randrange(max(1, len(closing) // 8))
        closing = closing[:k * 8] + closing[(k + 1) * 8:]
    elif broken == "none":
        closing = b""
    elif broken == "double":
        closing = closing + seq_end + item_end
    elif broken == "swap":
        closing = (seq_end + item_end) * depth
    elif broken == "defined":  # an item of defined length around undefined ones
        out = head((0x0008, 0x1140), 0xFFFFFFFF) + item(len(leaf) + 8) + out
        closing += seq_end
    return out + closing


def m_sequence(r, b, seed):
    depth = r.choice([1, 2, 5, 50, 127, 128, 129, 140, 300])
    broken = r.choice(["ok", "drop", "none", "double", "swap", "defined"])
    seq = sequence(r, seed.fmt, depth, broken)
    els = parse(b, seed.fmt)
    at = next((e.start for e in els if e.tag > (0x0008, 0x1140)), len(b))
    if r.random() < 0.2:
        at = len(b)  # after the pixel data
    return b[:at] + seq + b[at:]


def m_image(r, b, seed):
    if r.random() < 0.6:
        tag = r.choice(IMAGE_US)
        v = r.choice(US_EXTREMES)
        e = ">" if seed.fmt == "ebe" else "<"
        return set_value(b, seed.fmt, tag, b"US", struct.pack(e + "H", v))
    tag = r.choice(IMAGE_STR)
    vr = {(0x0008, 0x0005): b"CS", (0x0028, 0x0004): b"CS", (0x0008, 0x0060): b"CS",
          (0x0028, 0x0008): b"IS", (0x0020, 0x0013): b"IS", (0x0028, 0x0120): b"US"}.get(tag, b"DS")
    return set_value(b, seed.fmt, tag, vr, r.choice(STR_EXTREMES))


def m_uid(r, b, seed):
    tag = r.choice(UID_TAGS[2:])  # study or series: the request does not name them
    val = r.choice([b"", b"1", b"1.2..3", b".1.2", b"1.2.", b"../../etc", b"1" * 65,
                    b"1.2.3\0", b"1.2.840.10008.1.2\\1.2.3", b"0.0", b"1.2.3 ",
                    b"1.2.3/4", b"\x00" * 8, b"1." * 32 + b"1"])
    return set_value(b, seed.fmt, tag, b"UI", val)


def uid_valid(v):
    """ingest_uid_valid's rule, after the padding DCMTK strips."""
    v = v.rstrip(b"\0").strip(b" ")
    return (0 < len(v) <= 64 and not v.startswith(b".") and not v.endswith(b".") and
            b".." not in v and all(c in b"0123456789." for c in v))


def bad_uids(seed, ds):
    """The identifying UIDs of a well-formed dataset that ingest must refuse."""
    return ["(%04X,%04X)" % t for t in UID_TAGS
            if not uid_valid(get_value(ds, seed.fmt, t) or b"")]


def m_cut(r, b, seed):
    return b[:r.randrange(len(b))]


MUTATORS = [
    ("bitflip", m_bitflip, 6), ("byterun", m_byterun, 4), ("insdel", m_insdel, 3),
    ("length", m_length, 6), ("vr", m_vr, 4), ("duplicate", m_duplicate, 3),
    ("order", m_order, 3), ("remove", m_remove, 3), ("pixels", m_pixels, 4),
    ("sequence", m_sequence, 3), ("image", m_image, 6), ("uid", m_uid, 2), ("cut", m_cut, 1),
]


def deflate(body):
    """Raw deflate, padded to an even length as PS3.5 A.5 asks."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = c.compress(body) + c.flush()
    return out + b"\0" if len(out) % 2 else out


def mutate(r, seed, body):
    """(kinds applied, dataset bytes, transfer syntax to send them under)."""
    kinds = []
    total = sum(w for _, _, w in MUTATORS)
    for _ in range(r.choice([1, 1, 1, 2, 2, 3])):
        x = r.uniform(0, total)
        for name, fn, w in MUTATORS:
            x -= w
            if x <= 0:
                break
        try:
            body = fn(r, body, seed)
        except (struct.error, ValueError, IndexError):
            pass  # a mutation that cannot apply to what earlier ones left
        kinds.append(name)
        if not body:
            body = b"\0\0\0\0"
    ts = TS[seed.kind]
    if seed.kind == "deflate":
        body = deflate(body)
        if r.random() < 0.2:
            body = m_bitflip(r, body, seed)
            kinds.append("deflated-bitflip")
    if r.random() < 0.08:
        ts = r.choice([v for v in TS.values() if v != ts])
        kinds.append("ts-mismatch")
    return kinds, body, ts


# ---- the peer ----------------------------------------------------------------


class Peer:
    def __init__(self, host, port, called, wait):
        self.host, self.port, self.called, self.wait = host, port, called, wait

    def connect(self):
        return socket.create_connection((self.host, self.port), timeout=self.wait)

    def associate(self, ts, abstract=rawscu.CT_IMAGE, calling="FUZZ"):
        s = self.connect()
        s.sendall(assoc_rq(self.called, calling, abstract, ts))
        kind, body = rawscu.recv_pdu(s)
        if kind != 0x02:
            s.close()
            return None, "rejected-0x%02x" % kind
        return s, None

    def store(self, batch, ts):
        """Outcomes of C-STOREs of [(dataset, SOP UID)...] over one
        association: statuses, then how the exchange ended for the rest."""
        out = []
        try:
            s, why = self.associate(ts)
            if s is None:
                return [why] * len(batch)
            try:
                for ds, sop in batch:
                    s.sendall(rawscu.pdata(rawscu.store_command(sop), True, True))
                    rawscu.send_dataset(s, ds, True)
                    out.append("0x%04X" % rawscu.read_response(s))
                s.sendall(rawscu.pdu(0x05, bytes(4)))
                try:
                    rawscu.recv_pdu(s)
                except (EOFError, OSError):
                    pass
            finally:
                s.close()
        except socket.timeout:
            why = "timeout"
        except (EOFError, ConnectionError):
            why = "closed"
        except RuntimeError as e:
            why = "abort" if "0x07" in str(e) else "protocol:" + str(e)[:40]
        except (OSError, ValueError, struct.error) as e:
            why = "error:" + type(e).__name__
        return out + [why] * (len(batch) - len(out))

    def echo(self):
        """Seconds one C-ECHO took, or None when it failed."""
        t0 = time.monotonic()
        try:
            s = self.connect()
            try:
                s.sendall(assoc_rq(self.called, "FUZZECHO", VERIFICATION, TS["implicit"]))
                kind, _ = rawscu.recv_pdu(s)
                if kind != 0x02:
                    return None
                cmd = echo_command()
                s.sendall(rawscu.pdata(cmd, True, True))
                if rawscu.read_response(s) != 0:
                    return None
                s.sendall(rawscu.pdu(0x05, bytes(4)))
                rawscu.recv_pdu(s)
            finally:
                s.close()
        except (OSError, EOFError, RuntimeError, ValueError, struct.error):
            return None
        return time.monotonic() - t0


def assoc_rq(called, calling, abstract, ts, max_pdu=16384, pcid=1):
    pc = struct.pack(">BBBB", pcid, 0, 0, 0) + rawscu.item(0x30, abstract) + \
        rawscu.item(0x40, ts.encode() if isinstance(ts, str) else ts)
    user = rawscu.item(0x51, struct.pack(">I", max_pdu)) + \
        rawscu.item(0x52, b"1.2.826.0.1.3680043.9.7.99")
    body = (struct.pack(">HH", 1, 0) + called.ljust(16).encode() + calling.ljust(16).encode() +
            bytes(32) + rawscu.item(0x10, rawscu.APP_CONTEXT) + rawscu.item(0x20, pc) +
            rawscu.item(0x50, user))
    return rawscu.pdu(0x01, body)


def echo_command():
    els = (rawscu.element(0, 0x0002, rawscu.pad(VERIFICATION)) +
           rawscu.element(0, 0x0100, struct.pack("<H", 0x30)) +
           rawscu.element(0, 0x0110, struct.pack("<H", 1)) +
           rawscu.element(0, 0x0800, struct.pack("<H", 0x0101)))
    return rawscu.element(0, 0x0000, struct.pack("<I", len(els))) + els


# ---- PDU mutations -------------------------------------------------------------


def pdu_case(r, peer, ds, sop, ts):
    """One upper-layer mutation: builds and sends a broken exchange; returns
    (kind, outcome)."""
    kind = r.choice(["assoc-field", "assoc-item", "assoc-len", "assoc-big", "pdu-len", "pdv-len",
                     "pdv-ctrl", "pdv-pcid", "pdu-type", "pdu-order", "many-pdv", "tail"])
    rq = bytearray(assoc_rq(peer.called, "FUZZPDU", rawscu.CT_IMAGE, ts,
                            max_pdu=r.choice([16384, 0, 1, 6, 0xFFFFFFFF]), pcid=r.choice(
                                [1, 1, 1, 0, 2, 255])))
    if kind == "assoc-field":
        i = r.randrange(6, 74)  # version, reserved, AE titles
        rq[i] = r.randrange(256)
    elif kind == "assoc-item":
        i = r.randrange(74, len(rq))
        for _ in range(r.randint(1, 4)):
            rq[r.randrange(74, len(rq))] = r.choice([0, 0xFF, 0x7F, r.randrange(256)])
        rq[i] ^= 1 << r.randrange(8)
    elif kind == "assoc-len":
        # An item length anywhere after the fixed fields set to something wrong.
        i = r.randrange(74, len(rq) - 4)
        struct.pack_into(">H", rq, i + 2, r.choice([0, 1, 0xFFFF, 0x8000, 3]))
    elif kind == "assoc-big":
        rq = bytearray(assoc_big(r, peer.called, ts))
    elif kind == "pdu-len":
        struct.pack_into(">I", rq, 2, r.choice([0, 1, 68, 0xFFFFFFFF, len(rq) + 100,
                                                len(rq) - 10]))
    try:
        s = peer.connect()
    except OSError:
        return kind, "connect-failed"
    try:
        s.sendall(bytes(rq))
        if kind in ("assoc-field", "assoc-item", "assoc-len", "assoc-big", "pdu-len"):
            return kind, drain(s, 2)
        k, _ = rawscu.recv_pdu(s)
        if k != 0x02:
            return kind, "rejected-0x%02x" % k
        cmd = rawscu.store_command(sop)
        data = []
        if kind == "pdv-len":
            pdv = bytearray(rawscu.pdata(cmd, True, True))
            struct.pack_into(">I", pdv, 6, r.choice([0, 1, 2, 0xFFFFFFFF, len(cmd) + 100,
                                                     len(cmd) - 3]))
            data.append(bytes(pdv))
        elif kind == "pdv-ctrl":
            data.append(rawscu.pdata(cmd, True, True))
            pdv = bytearray(rawscu.pdata(ds[:4000], False, False))
            pdv[11] = r.choice([0x01, 0x03, 0xFC, 0xFF, 0x02])
            data.append(bytes(pdv))
            data.append(rawscu.pdata(ds[4000:], False, True))
        elif kind == "pdv-pcid":
            pdv = bytearray(rawscu.pdata(cmd, True, True))
            pdv[10] = r.choice([0, 3, 255, 2])
            data.append(bytes(pdv))
            data.append(rawscu.pdata(ds, False, True))
        elif kind == "pdu-type":
            data.append(rawscu.pdata(cmd, True, True))
            data.append(rawscu.pdu(r.choice([0x01, 0x02, 0x03, 0x06, 0x08, 0x00, 0xFF]),
                                   os.urandom(r.choice([0, 4, 60]))))
        elif kind == "pdu-order":
            data.append(rawscu.pdata(ds, False, True))  # dataset before its command
            data.append(rawscu.pdata(cmd, True, True))
        elif kind == "many-pdv":
            # Many tiny PDVs in one PDU, then an empty PDV flagged last.
            body = b"".join(struct.pack(">IBB", 3, 1, 1) + cmd[i:i + 1]
                            for i in range(len(cmd)))
            body += struct.pack(">IBB", 2, 1, 3)
            data.append(rawscu.pdu(0x04, body))
            data.append(rawscu.pdata(ds, False, True))
        elif kind == "tail":
            data.append(rawscu.pdata(cmd, True, True))
            data.append(rawscu.pdata(ds, False, True))
            data.append(os.urandom(r.choice([1, 5, 6, 7, 100])))
        for d in data:
            s.sendall(d)
        return kind, drain(s, 2)
    except socket.timeout:
        return kind, "timeout"
    except (EOFError, ConnectionError):
        return kind, "closed"
    except (OSError, RuntimeError, ValueError, struct.error) as e:
        return kind, "error:" + type(e).__name__
    finally:
        s.close()


def assoc_big(r, called, ts):
    """An A-ASSOCIATE-RQ with many, repeated or odd presentation contexts
    and user information sub-items (role selection, extended negotiation,
    user identity) of extreme sizes."""
    pcs = b""
    for _ in range(r.choice([1, 2, 64, 128, 129, 255, 400])):
        pcid = r.choice([1, 1, 3, 255, r.randrange(256)])
        tss = b"".join(rawscu.item(0x40, r.choice([ts.encode(), b"", b"1.2", b"9" * 64,
                                                   b"1.2.840.10008.1.2.4.50"]))
                       for _ in range(r.choice([0, 1, 2, 50])))
        pcs += rawscu.item(0x20, struct.pack(">BBBB", pcid, 0, 0, 0) +
                           rawscu.item(0x30, r.choice([rawscu.CT_IMAGE, b"", b"1" * 64])) + tss)
    sub = [rawscu.item(0x51, struct.pack(">I", r.choice([0, 1, 16384, 0xFFFFFFFF])))]
    for _ in range(r.choice([0, 1, 5, 100])):
        k = r.choice([0x52, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x53, 0x99])
        sub.append(rawscu.item(k, os.urandom(r.choice([0, 1, 2, 4, 64, 2000]))))
    body = (struct.pack(">HH", 1, 0) + called.ljust(16).encode() + b"FUZZBIG".ljust(16) +
            bytes(32) + rawscu.item(0x10, rawscu.APP_CONTEXT) + pcs +
            rawscu.item(0x50, b"".join(sub)[:65535]))
    return rawscu.pdu(0x01, body)


def drain(s, limit):
    """How the peer answered: the PDU types it sent before closing."""
    s.settimeout(limit)
    seen = []
    try:
        while True:
            k, body = rawscu.recv_pdu(s)
            seen.append("%02x" % k)
            if k in (0x03, 0x07):
                break
            if k == 0x04:
                try:
                    seen[-1] = "04:0x%04X" % rawscu.status_of(body[6:])
                except (ValueError, struct.error):
                    pass
                s.sendall(rawscu.pdu(0x05, bytes(4)))
    except socket.timeout:
        seen.append("open")
    except (EOFError, OSError):
        seen.append("closed")
    return "-".join(seen[:4])


# ---- driver -------------------------------------------------------------------


class Prober(threading.Thread):
    """C-ECHO every 0.5 s meanwhile; records the slowest and any failure."""

    def __init__(self, peer):
        super().__init__(daemon=True)
        self.peer, self.stop, self.worst, self.failures, self.n = \
            peer, threading.Event(), 0.0, 0, 0

    def run(self):
        while not self.stop.wait(0.5):
            t = self.peer.echo()
            self.n += 1
            if t is None:
                self.failures += 1
            else:
                self.worst = max(self.worst, t)


def check_state(state, acked):
    """Problems with the acknowledged instances in the daemon's state."""
    problems = []
    db = sqlite3.connect("file:%s/ldct.db?mode=ro" % state, uri=True, timeout=30)
    for sop, sent in acked.items():
        row = db.execute("SELECT path FROM instances WHERE sop_instance_uid = ?",
                         (sop,)).fetchone()
        if not row:
            problems.append("%s acknowledged but not in the database" % sop)
            continue
        try:
            raw = open(row[0], "rb").read()
        except OSError as e:
            problems.append("%s: stored file unreadable: %s" % (sop, e))
            continue
        meta_len = struct.unpack("<I", raw[140:144])[0]
        if raw[144 + meta_len:] != sent:
            problems.append("%s: stored dataset differs from what was sent" % sop)
    db.close()
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("seeds", nargs="+")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--pdu-iterations", type=int, default=0)
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (0: no limit)")
    p.add_argument("--called", default="LDCTNODE")
    p.add_argument("--wait", type=float, default=30, help="socket timeout per exchange")
    p.add_argument("--echo-limit", type=float, default=10)
    p.add_argument("--state")
    p.add_argument("--save", help="folder to keep every mutant sent (NNNNN.ds + .txt)")
    p.add_argument("--pid", type=int, help="the daemon's PID, checked after every send")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()
    r = random.Random(a.seed)
    seeds = []
    for d in a.seeds:
        for f in sorted(os.listdir(d)):
            if f.endswith(".dcm"):
                seeds.append(Seed(os.path.join(d, f)))
    peer = Peer(a.host, a.port, a.called, a.wait)
    if peer.echo() is None:
        print("dcmfuzz: no C-ECHO answer from %s:%d" % (a.host, a.port), file=sys.stderr)
        return 1
    prober = Prober(peer)
    prober.start()
    outcomes = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    acked, failures, slow = {}, [], []
    start = time.monotonic()
    base = "1.2.826.0.1.3680043.9.7.%d.%d" % (a.seed, int(time.time()) % 100000)
    if a.save:
        os.makedirs(a.save, exist_ok=True)

    def after(i, label):
        if a.pid:
            try:
                os.kill(a.pid, 0)
            except OSError:
                failures.append("iteration %d (%s): the daemon is gone" % (i, label))
                return False
        t = peer.echo()
        if t is None or t > a.echo_limit:
            failures.append("iteration %d (%s): C-ECHO %s" %
                            (i, label, "failed" if t is None else "took %.1f s" % t))
            return peer.echo() is not None
        return True

    i = 0
    while i < a.iterations:
        if a.seconds and time.monotonic() - start > a.seconds:
            break
        seed = r.choice(seeds)
        group = [s_ for s_ in seeds if s_.kind == seed.kind]
        batch, labels = [], []
        for _ in range(r.choice([1, 1, 1, 1, 2, 3])):
            sop = "%s.%d" % (base, i)
            series = "%s.9%d.%d" % (base, seeds.index(seed) // 3, i // 3)
            body = with_uids(r.choice(group), sop.encode(), series.encode())
            if r.random() < 0.15 and len(batch) > 0:
                kinds, ds, ts_ = ["none"], body, TS[seed.kind]  # a good one after a bad one
                if seed.kind == "deflate":
                    ds = deflate(body)
            else:
                kinds, ds, ts_ = mutate(r, seed, body)
            if batch and ts_ != ts:
                kinds, ds = kinds + ["ts-mismatch"], ds
            elif not batch:
                ts = ts_
            batch.append((ds, sop.encode()))
            labels.append((i, sop, kinds))
            if a.save:
                open(os.path.join(a.save, "%05d.ds" % i), "wb").write(ds)
                open(os.path.join(a.save, "%05d.txt" % i), "w").write(
                    "%s %s %s %s batch-of-%d\n" % (sop, ts, seed.path, "+".join(kinds),
                                                  len(batch)))
            i += 1
        t0 = time.monotonic()
        outs = peer.store(batch, ts)
        took = time.monotonic() - t0
        prev = "0x"
        for (n, sop, kinds), (ds, _), out in zip(labels, batch, outs):
            label = "+".join(kinds)
            if took > 5:
                slow.append("iteration %d (%s): %s after %.1f s" % (n, label, out, took))
            if out == "0x0000":
                acked[sop] = ds
                # Only the uid mutation leaves a dataset our parser reads as DCMTK does.
                if kinds == ["uid"] and seed.kind != "deflate" and bad_uids(seed, ds):
                    failures.append("iteration %d: acknowledged with invalid %s" %
                                    (n, " ".join(bad_uids(seed, ds))))
            for k in set(kinds):
                outcomes[k][out] += 1
            totals[out] += 1
            if len(batch) > 1:
                outcomes["batched"][out] += 1
            if a.verbose:
                print("%5d %-40s %s %.2fs" % (n, label[:40], out, took), flush=True)
            if out == "timeout" or out.startswith("error"):
                failures.append("iteration %d (%s): %s" % (n, label, out))
            if kinds == ["none"] and out != "0x0000" and prev.startswith("0x"):
                failures.append("iteration %d: a valid instance after a refused one got %s"
                                % (n, out))
            prev = out
        if not after(i - 1, "+".join("+".join(k) for _, _, k in labels)):
            break
    pdu_totals = collections.defaultdict(collections.Counter)
    for i in range(a.pdu_iterations):
        if a.seconds and time.monotonic() - start > a.seconds:
            break
        sop = "%s.0.%d" % (base, i + 1)  # an arc no dataset mutant uses
        ds0 = with_uids(seeds[0], sop.encode(), ("%s.0.0" % base).encode())
        kind, out = pdu_case(r, peer, ds0, sop.encode(), TS[seeds[0].kind])
        pdu_totals[kind][out] += 1
        if a.verbose:
            print("pdu %4d %-12s %s" % (i, kind, out), flush=True)
        if out == "timeout" or out.startswith("error"):
            failures.append("pdu iteration %d (%s): %s" % (i, kind, out))
        if not after(i, "pdu " + kind):
            break
    prober.stop.set()
    prober.join()
    print("dataset mutants sent: %d in %.0f s" % (sum(totals.values()), time.monotonic() - start))
    print("outcomes: " + ", ".join("%s %d" % kv for kv in totals.most_common()))
    for k in sorted(outcomes):
        print("  %-16s %s" % (k, ", ".join("%s %d" % kv for kv in outcomes[k].most_common())))
    if pdu_totals:
        print("PDU mutants sent: %d" % sum(sum(c.values()) for c in pdu_totals.values()))
        for k in sorted(pdu_totals):
            print("  %-16s %s" % (k, ", ".join("%s %d" % kv for kv in
                                                pdu_totals[k].most_common(8))))
    print("echo probe: %d echoes, %d failed, slowest %.2f s" %
          (prober.n, prober.failures, prober.worst))
    if prober.failures or prober.worst > a.echo_limit:
        failures.append("echo probe: %d failed, slowest %.2f s" % (prober.failures, prober.worst))
    for s in slow:
        print("slow: " + s)
    if a.state:
        time.sleep(0.5)
        problems = check_state(a.state, acked)
        print("acknowledged instances checked: %d, problems %d" % (len(acked), len(problems)))
        failures += problems
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
