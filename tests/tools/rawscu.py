#!/usr/bin/env python3
"""rawscu: a deliberately misbehaving DICOM peer for robustness tests.

Speaks just enough of the DICOM upper layer (PS3.8) by hand to do what a
well-behaved toolkit refuses to: send a C-STORE whose dataset is cut short,
stall in the middle of a dataset, or send bytes that are not DICOM at all.

    rawscu.py HOST PORT MODE [FILE] [options]

Modes:
  garbage            connect, send 4 KiB of random bytes, report what came back
  bad-associate      send an A-ASSOCIATE-RQ that DCMTK cannot parse (a user
                     identity sub-item whose primary field claims more bytes
                     than the item holds), keep the connection open and
                     wait (up to --wait seconds) for the peer to close it;
                     prints "closed after S s" or "still open after S s"
  leaky-associate    send --count A-ASSOCIATE-RQs (one connection each, in
                     turn) that DCMTK 3.6.7 refuses after building lists it
                     then leaks: 40 transfer syntaxes then one of 65 bytes,
                     a presentation context without a transfer syntax after
                     4 good ones, a broken extended negotiation sub-item;
                     waits for each to be closed; prints how many were
                     closed without an answer
  associate          send a valid A-ASSOCIATE-RQ, print "accepted" or
                     "rejected (result R, source S, reason N)", then keep the connection open without a
                     word (no release) and wait (up to --wait seconds) for
                     the peer to close it; prints "closed after S s" or
                     "still open after S s"
  store FILE         associate, C-STORE the dataset of FILE (Explicit VR Little
                     Endian, as written by mkseries), print the status (hex)
  store FILE --cut N send only the first N bytes of the dataset, flagged as
                     the last fragment (a truncated dataset)
  store FILE --raw-sop UID
                     FILE holds raw dataset bytes (no meta header), sent as
                     the instance UID, in the transfer syntax --ts (default
                     Explicit VR Little Endian; the bytes must match it)
  store FILE --nest-command N
                     append N nested sequences of undefined length to the
                     C-STORE-RQ command set (reproduces a crash inside DCMTK's
                     command parser; see docs/NOTES-review5.md)
  store FILE --hold S
                     after the response, keep the association open S seconds
                     before the release (a sender with more to send)
  store FILE --hold S --again
                     then C-STORE the dataset once more on the same
                     association and print that status too (a connection
                     that outlives something the peer did meanwhile)
  store FILE --until F --again
                     as --hold, but hold until the file F exists (at most
                     --wait seconds)
  store FILE --stall N
                     send the first N bytes of the dataset, not flagged last,
                     then wait (up to --wait seconds) for the peer to give up;
                     prints "closed after S s" or "still open after S s"

With --source ADDR every connection comes from that local address (another
peer on loopback: 127.0.0.2). With --tls CA CERT KEY every connection is TLS (the peer's certificate is
checked against CA, host names are not; CERT and KEY identify this caller):
the same misbehaviour, behind a completed handshake.

Exit status 0 when the exchange went as described (whatever the status), 1 on
a protocol surprise or a connection error. Single-threaded; no state.
"""
import argparse
import os
import socket
import ssl
import struct
import sys
import time

CT_IMAGE = b"1.2.840.10008.5.1.4.1.1.2"
EXPLICIT_LE = b"1.2.840.10008.1.2.1"
APP_CONTEXT = b"1.2.840.10008.3.1.1.1"


def pad(uid):
    return uid + (b"\0" if len(uid) % 2 else b"")


def item(kind, body):
    return struct.pack(">BBH", kind, 0, len(body)) + body


def pdu(kind, body):
    return struct.pack(">BBI", kind, 0, len(body)) + body


def associate_rq(called, calling, ts, more_user=b""):
    pc = struct.pack(">BBBB", 1, 0, 0, 0) + item(0x30, CT_IMAGE) + item(0x40, ts.encode())
    user = item(0x51, struct.pack(">I", 16384)) + item(0x52, b"1.2.826.0.1.3680043.9.7.99") + \
        more_user
    body = (struct.pack(">HH", 1, 0) + called.ljust(16).encode() + calling.ljust(16).encode() +
            bytes(32) + item(0x10, APP_CONTEXT) + item(0x20, pc) + item(0x50, user))
    return pdu(0x01, body)


def bad_associate_rq(called, calling, ts):
    """associate_rq plus a User Identity sub-item (0x58) whose primary field
    length (1000) exceeds the item: DCMTK refuses the PDU."""
    ident = struct.pack(">BBH", 1, 0, 1000) + b"user" + struct.pack(">H", 0)
    return associate_rq(called, calling, ts, item(0x58, ident))


def leaky_associate_rq(called, calling, ts, kind):
    """An A-ASSOCIATE-RQ that DCMTK 3.6.7 refuses and leaks: kind 0, a
    presentation context with 40 transfer syntaxes and then one over 64
    bytes; 1, 4 good presentation contexts and one without a transfer
    syntax; 2, an extended negotiation sub-item whose UID runs past it."""
    tss = b"".join(item(0x40, ts.encode()) for _ in range(40))
    good = struct.pack(">BBBB", 1, 0, 0, 0) + item(0x30, CT_IMAGE) + tss
    pcs, more_user = item(0x20, good), b""
    if kind == 0:
        pcs = item(0x20, good + item(0x40, b"1" * 65))
    elif kind == 1:
        pcs = item(0x20, good) * 4 + item(0x20, struct.pack(">BBBB", 3, 0, 0, 0) +
                                             item(0x30, CT_IMAGE))
    else:
        more_user = item(0x56, struct.pack(">H", 200) + CT_IMAGE)
    user = item(0x51, struct.pack(">I", 16384)) + item(0x52, b"1.2.826.0.1.3680043.9.7.99") + \
        more_user
    body = (struct.pack(">HH", 1, 0) + called.ljust(16).encode() + calling.ljust(16).encode() +
            bytes(32) + item(0x10, APP_CONTEXT) + pcs + item(0x50, user))
    return pdu(0x01, body)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def recv_pdu(s):
    head = recv_exact(s, 6)
    kind, _, length = struct.unpack(">BBI", head)
    return kind, recv_exact(s, length)


def element(group, elem, value):
    return struct.pack("<HHI", group, elem, len(value)) + value


def store_command(sop_uid):
    els = (element(0, 0x0002, pad(CT_IMAGE)) + element(0, 0x0100, struct.pack("<H", 1)) +
           element(0, 0x0110, struct.pack("<H", 1)) + element(0, 0x0700, struct.pack("<H", 0)) +
           element(0, 0x0800, struct.pack("<H", 0)) + element(0, 0x1000, pad(sop_uid)))
    return element(0, 0x0000, struct.pack("<I", len(els))) + els


def pdata(data, command, last):
    ctrl = (1 if command else 0) | (2 if last else 0)
    pdv = struct.pack(">IBB", len(data) + 2, 1, ctrl) + data
    return pdu(0x04, pdv)


def send_dataset(s, data, last):
    """Sends data in P-DATA PDUs within the peer's usual maximum length;
    `last` flags the final fragment as the end of the dataset."""
    step = 16000
    for i in range(0, max(len(data), 1), step):
        final = last and i + step >= len(data)
        s.sendall(pdata(data[i:i + step], False, final))


def dataset_of(path):
    """The dataset bytes of a Part 10 file and its SOP Instance UID."""
    raw = open(path, "rb").read()
    assert raw[128:132] == b"DICM", "not a Part 10 file"
    meta_len = struct.unpack("<I", raw[140:144])[0]
    ds = raw[144 + meta_len:]
    i = 0
    while i < len(ds):
        group, elem = struct.unpack("<HH", ds[i:i + 4])
        vr = ds[i + 4:i + 6]
        if vr in (b"OB", b"OW", b"SQ", b"UN", b"UT", b"OF", b"UC", b"UR"):
            n, hdr = struct.unpack("<I", ds[i + 8:i + 12])[0], 12
        else:
            n, hdr = struct.unpack("<H", ds[i + 6:i + 8])[0], 8
        if (group, elem) == (0x0008, 0x0018):
            return ds, ds[i + hdr:i + hdr + n].rstrip(b"\0 ")
        i += hdr + n
    raise ValueError("no SOP Instance UID")


def status_of(command):
    i = 0
    while i + 8 <= len(command):
        group, elem, n = struct.unpack("<HHI", command[i:i + 8])
        if (group, elem) == (0, 0x0900):
            return struct.unpack("<H", command[i + 8:i + 10])[0]
        i += 8 + n
    raise ValueError("no status in the response")


def connect(a):
    source = (a.source, 0) if a.source else None
    s = socket.create_connection((a.host, a.port), timeout=a.wait, source_address=source)
    if not a.tls:
        return s
    ca, cert, key = a.tls
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    ctx.check_hostname = False
    ctx.load_cert_chain(cert, key)
    return ctx.wrap_socket(s)


def associate(a):
    s = connect(a)
    s.sendall(associate_rq(a.called, a.calling, a.ts))
    kind, body = recv_pdu(s)
    if kind != 0x02:
        raise RuntimeError("association not accepted (PDU type 0x%02x)" % kind)
    return s


def read_response(s):
    command = b""
    while True:
        kind, body = recv_pdu(s)
        if kind != 0x04:
            raise RuntimeError("expected P-DATA, got PDU type 0x%02x" % kind)
        i = 0
        while i < len(body):
            n = struct.unpack(">I", body[i:i + 4])[0]
            ctrl = body[i + 5]
            command += body[i + 6:i + 4 + n]
            i += 4 + n
            if ctrl & 3 == 3:
                return status_of(command)


def wait_closed(s, limit):
    start = time.monotonic()
    s.settimeout(limit)
    try:
        while s.recv(65536):
            pass
        return time.monotonic() - start, True
    except socket.timeout:
        return time.monotonic() - start, False
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return time.monotonic() - start, True


def mode_garbage(a):
    s = connect(a)
    s.sendall(os.urandom(4096))
    secs, closed = wait_closed(s, a.wait)
    print("%s after %.1f s" % ("closed" if closed else "still open", secs))
    return 0


def mode_bad_associate(a):
    s = connect(a)
    s.sendall(bad_associate_rq(a.called, a.calling, a.ts))
    secs, closed = wait_closed(s, a.wait)
    print("%s after %.1f s" % ("closed" if closed else "still open", secs))
    return 0


def mode_associate(a):
    s = connect(a)
    s.sendall(associate_rq(a.called, a.calling, a.ts))
    kind, body = recv_pdu(s)
    if kind == 0x03:  # A-ASSOCIATE-RJ: reserved, result, source, reason/diag.
        print("rejected (result %d, source %d, reason %d)" % tuple(body[1:4]), flush=True)
    else:
        print("accepted" if kind == 0x02 else "PDU type 0x%02x" % kind, flush=True)
    secs, closed = wait_closed(s, a.wait)
    print("%s after %.1f s" % ("closed" if closed else "still open", secs))
    return 0


def mode_leaky_associate(a):
    unanswered = 0
    for i in range(a.count):
        s = connect(a)
        try:
            s.sendall(leaky_associate_rq(a.called, a.calling, a.ts, i % 3))
            unanswered += s.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            unanswered += 1
        finally:
            s.close()
    print("%d of %d closed without an answer" % (unanswered, a.count))
    return 0


def mode_store(a):
    if a.raw_sop:
        ds, sop = open(a.file, "rb").read(), a.raw_sop.encode()
    else:
        ds, sop = dataset_of(a.file)
    s = associate(a)
    command = store_command(sop)
    if a.nest_command:
        opening = struct.pack("<HHI", 0x0000, 0x5011, 0xFFFFFFFF) + \
            struct.pack("<HHI", 0xFFFE, 0xE000, 0xFFFFFFFF)
        closing = struct.pack("<HHI", 0xFFFE, 0xE00D, 0) + struct.pack("<HHI", 0xFFFE, 0xE0DD, 0)
        command += opening * a.nest_command + closing * a.nest_command
    for i in range(0, len(command), 16000):
        s.sendall(pdata(command[i:i + 16000], True, i + 16000 >= len(command)))
    if a.stall is not None:
        send_dataset(s, ds[:a.stall], False)
        secs, closed = wait_closed(s, a.wait)
        print("%s after %.1f s" % ("closed" if closed else "still open", secs))
        return 0
    body = ds[:a.cut] if a.cut is not None else ds
    send_dataset(s, body, True)
    status = read_response(s)
    print("0x%04X" % status, flush=True)
    if a.hold:
        time.sleep(a.hold)
    if a.until:
        end = time.monotonic() + a.wait
        while not os.path.exists(a.until) and time.monotonic() < end:
            time.sleep(0.1)
    if a.again:
        s.sendall(pdata(command, True, True))
        send_dataset(s, body, True)
        print("0x%04X" % read_response(s), flush=True)
    s.sendall(pdu(0x05, bytes(4)))  # A-RELEASE-RQ
    try:
        recv_pdu(s)
    except (EOFError, OSError):
        pass
    s.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("mode", choices=["garbage", "store", "associate", "bad-associate",
                                    "leaky-associate"])
    p.add_argument("file", nargs="?")
    p.add_argument("--cut", type=int)
    p.add_argument("--stall", type=int)
    p.add_argument("--wait", type=float, default=30)
    p.add_argument("--hold", type=float)
    p.add_argument("--again", action="store_true")
    p.add_argument("--until")
    p.add_argument("--raw-sop")
    p.add_argument("--nest-command", type=int)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--ts", default=EXPLICIT_LE.decode())
    p.add_argument("--called", default="LDCTNODE")
    p.add_argument("--calling", default="RAWSCU")
    p.add_argument("--tls", nargs=3, metavar=("CA", "CERT", "KEY"))
    p.add_argument("--source", help="connect from this local address (e.g. 127.0.0.2)")
    a = p.parse_args()
    try:
        modes = {"garbage": mode_garbage, "store": mode_store, "associate": mode_associate,
                 "bad-associate": mode_bad_associate, "leaky-associate": mode_leaky_associate}
        return modes[a.mode](a)
    except (OSError, EOFError, RuntimeError, ValueError) as e:
        print("rawscu: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
