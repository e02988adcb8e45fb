#!/usr/bin/env python3
"""Write the seeds of the `session` fuzz target: small scripts of inputs to
one peer's PeerSession, named after where they lead. The script format is
holdfast::session::selfcheck's (src/session/selfcheck.rs): a 17-octet
header choosing the peer's configuration, then opcodes and their
arguments. Run from the fuzz/ folder: ./make-session-seeds.py
"""
import os, struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "seeds", "session")

u8 = lambda v: struct.pack(">B", v)
u16 = lambda v: struct.pack(">H", v)
u32 = lambda v: struct.pack(">I", v)


def header(flags=0x01, asn=0, hold=9, ka=2, mrai=0, ipv6=False, ready=True,
           retry=1, restart=120, seed=1, bfd_up=False):
    """flags: bit 0 IPv4, 1 IPv6, 2 passive, 3 GR, 4 N bit, 5 restarting,
    6 LLGR, 7 BFD; asn: 0 65000, 1 65001 (iBGP), 2 "external",
    3 "internal", 4 local_asn 4200000001, 5 4200000002."""
    more = (1 if ipv6 else 0) | (2 if ready else 0) | ((retry - 1) << 2)
    return (u8(flags) + u8(asn) + u16(hold) + u8(ka) + u8(mrai) + u8(more)
            + u8(restart) + struct.pack(">Q", seed) + u8(1 if bfd_up else 0))


# Opcodes (see selfcheck::session).
def advance(ms): return u8(0) + u16(ms // 16)
def to_deadline(): return u8(1)
def busy(ms): return u8(2) + u8(ms // 64)
def connected(): return u8(3)
def incoming(): return u8(4)
def connect_fails(): return u8(5)
def closed(pick=0): return u8(6) + u8(pick)


def open_args(caps=0x08, hold=9, bgp_id=0xC0000201, asn=None):
    if asn is not None:
        caps |= 0x80
    return u8(caps) + u16(hold) + u32(bgp_id) + (u32(asn) if asn is not None else b"")


def update_args(n=3, fam=0, plen=24, seed=0xC6336400, stride=256):
    return u16(n) + u8(fam) + u8(plen - 8 if fam == 0 else plen - 16) + u32(seed) + u32(stride)


def msg(what, args=b"", pick=0, split=0):
    """what: 0 OPEN, 1 KEEPALIVE, 2 UPDATE, 3 ROUTE-REFRESH, 4 NOTIFICATION."""
    return u8(7) + u8(pick) + u8(what) + u16(split) + args


def open_keepalive(pick=0, **kw): return u8(8) + u8(pick) + open_args(**kw)


def corrupt(what, at, value, args=b"", pick=0):
    return u8(9) + u8(pick) + u8(what) + u16(at) + u8(value) + args


def raw(data, times=1, pick=0):
    return u8(10) + u8(pick) + u16(len(data)) + u8(times - 1) + data


def written(octets=0, pick=0): return u8(11) + u8(pick) + u16(octets // 64)


def table(n, kinds=1, flags=0, fam=0, plen=32, seed=0xCB007100, stride=1):
    """flags: bit 0 large communities, 1 MED, 2 LOCAL_PREF, 3-5 prepend,
    6 some 500 octets of communities, 7 one attribute set per route."""
    return (u8(12) + u16(n) + u8(kinds) + u8(flags) + u8(fam)
            + u8(plen - 8 if fam == 0 else plen - 16) + u32(seed) + u32(stride))


def edit(m, r, n, kinds=1, flags=0, fam=0, plen=32, seed=0xCB007200, stride=1):
    return (u8(13) + u8(m) + u8(r) + u8(n) + u8(kinds) + u8(flags) + u8(fam)
            + u8(plen - 8 if fam == 0 else plen - 16) + u32(seed) + u32(stride))


def routes_ready(): return u8(14)
def bfd(up): return u8(15) + u8(1 if up else 0)
def end_restart(): return u8(16)
def stalled(pick=0): return u8(17) + u8(pick)
def refresh(fam=0, subtype=0, pick=0): return u8(18) + u8(pick) + u8(fam) + u8(subtype)


def stop(how):
    """how: 0 graceful, 1 withdraw, 2 deconfigured, 3 reconfigured."""
    return u8(19) + u8(how)


KEEPALIVE = 1
OPEN = 0
UPDATE = 2
NOTIFICATION = 4

seeds = {
    # eBGP over IPv4: a table, the router's OPEN and KEEPALIVE, the whole
    # table then End-of-RIB, an UPDATE from the router, a refresh, time.
    "established-ebgp": header() + table(20, kinds=3, flags=0x03) + connected()
    + open_keepalive() + written() + msg(UPDATE, update_args())
    + refresh(subtype=0) + written() + advance(3000) + msg(KEEPALIVE)
    + edit(4, 1, 5) + advance(3000) + msg(KEEPALIVE) + stop(1),
    # Both connections up, both OPENs: collision resolution (RFC 4271
    # §6.8) keeps one; the router's identifier is the higher.
    "collision": header() + connected() + incoming()
    + msg(OPEN, open_args(bgp_id=0xC0000209), pick=1)
    + msg(OPEN, open_args(bgp_id=0xC0000209), pick=0)
    + msg(KEEPALIVE, pick=0) + msg(KEEPALIVE, pick=1) + advance(2000) + msg(KEEPALIVE),
    # BFD goes down (Cease/BFD Down, RFC 9384) and up again: two sessions.
    "bfd-flap": header(flags=0x81, bfd_up=True) + connected() + open_keepalive()
    + bfd(False) + advance(5000) + bfd(True) + connected() + open_keepalive()
    + written() + stop(3),
    # 4096 /32s with 200 attribute sets over Extended Messages.
    "big-table-4096": header() + table(4096, kinds=200, flags=0x0b) + connected()
    + open_keepalive(caps=0x28) + written() + advance(1000),
    "extended-big-table": header(flags=0x03) + table(4096, kinds=7, fam=2, plen=48)
    + connected() + open_keepalive(caps=0x2a) + written() + edit(3, 0, 100, fam=2),
    # No KEEPALIVE from the router: Hold Timer Expired (RFC 4271 §6.5).
    "hold-expires": header() + connected() + open_keepalive() + to_deadline()
    + to_deadline() + to_deadline() + to_deadline() + to_deadline(),
    # Octets that are no message after the OPEN: a header error (§6.1).
    "garbage-after-open": header() + connected() + msg(OPEN, open_args())
    + raw(b"\xff" * 16 + b"\x00\x13\x07"),
    # The router's NOTIFICATION, then a refresh on the next session.
    "notification-refresh": header(flags=0x09) + table(5) + connected()
    + open_keepalive() + msg(NOTIFICATION, u8(6) + u8(4)) + to_deadline()
    + to_deadline() + connected() + open_keepalive() + refresh(subtype=1)
    + written() + refresh(subtype=0),
    # A 5000-octet message without Extended Message: Bad Message Length.
    "oversized-header": header() + connected() + open_keepalive()
    + raw(b"\xff" * 16 + u16(5000) + b"\x02"),
    "passive-ibgp-v6": header(flags=0x06, asn=3, ipv6=True, hold=0, ka=0)
    + table(50, fam=2, plen=64, flags=0x04) + incoming()
    + open_keepalive(caps=0x03, hold=0, asn=65001) + written(),
    "peer-update-split": header() + connected() + open_keepalive()
    + msg(UPDATE, update_args(n=300), split=30) + msg(UPDATE, update_args(fam=1, plen=64), split=19),
    # A corrupted KEEPALIVE marker once established: Connection Not
    # Synchronized, NOTIFICATION then close.
    "corrupt-keepalive": header() + table(3) + connected() + open_keepalive()
    + written() + corrupt(KEEPALIVE, 3, 0),
    # An OPEN of version 3: Unsupported Version Number (RFC 4271 §6.2).
    "bad-open-version": header() + connected() + corrupt(OPEN, 19, 3, open_args()),
    # An UPDATE whose attribute length runs past the message (RFC 7606 §4:
    # the whole message is malformed, session reset).
    "malformed-update": header() + connected() + open_keepalive()
    + corrupt(UPDATE, 22, 0xff, update_args(n=1)),
    # The router does not read: 4 MiB wait (tables of 4096 routes with
    # some 500 octets of attributes each), then no more UPDATEs until it
    # does; refreshes coalesce meanwhile.
    "backlog": header(mrai=0) + connected() + open_keepalive(caps=0x28)
    + b"".join(table(4096, flags=0xc3, seed=0x0A000000 + (i << 16)) for i in range(3))
    + refresh() + refresh() + written(60000) + written() + advance(100) + written(),
    # Graceful restart: restarting (R bit), End-of-RIB, then a graceful
    # stop (no NOTIFICATION, RFC 4724).
    "graceful-restart": header(flags=0x39, ready=False) + table(10) + connected()
    + open_keepalive(caps=0x18) + written() + routes_ready() + written()
    + end_restart() + stop(0),
    # MRAI 30 s: edits batched.
    "mrai": header(mrai=30) + table(100) + connected() + open_keepalive()
    + edit(3, 1, 10) + advance(1000) + edit(5, 0, 10) + to_deadline() + written()
    + msg(KEEPALIVE) + to_deadline(),
    # Connection attempts fail, idle back-off, an incoming one then.
    "connect-fails": header(retry=3) + connect_fails() + to_deadline() + to_deadline()
    + connect_fails() + to_deadline() + to_deadline() + incoming() + open_keepalive()
    + stalled(),
    # 4-octet AS towards a 2-octet peer (AS_TRANS, RFC 6793).
    "two-octet-peer": header(asn=4) + table(10, flags=0x08) + connected()
    + open_keepalive(caps=0x04, asn=65000) + written() + busy(5000) + msg(KEEPALIVE),
}

os.makedirs(out, exist_ok=True)
for name in os.listdir(out):
    os.remove(os.path.join(out, name))
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(len(seeds), "seeds written to", out)
