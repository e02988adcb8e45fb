#!/usr/bin/env python3
"""Derive the fuzz seeds from corpora/ in the repository (data only).

Each seed starts with one context octet (see bgp_proto::selfcheck::context_from):
bit 0 two-octet AS, bit 1 ADD-PATH IPv4, bit 2 ADD-PATH IPv6, bit 3 extended
messages. Run from the fuzz/ folder: ./make-seeds.py
"""
import hashlib, json, os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
corpora = os.path.join(here, "..", "corpora")
out = os.path.join(here, "seeds")

def put(target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def ctx_byte(asn4=True, add_path=False):
    return (0 if asn4 else 1) | (6 if add_path else 0)

messages = []
for line in open(os.path.join(corpora, "exabgp-qa", "vectors.jsonl")):
    v = json.loads(line)
    if v["kind"] != "message":
        continue
    info = v.get("conf_info") or {}
    b = bytes([ctx_byte(info.get("asn4") is not False, info.get("add_path_capability") is not None)])
    msg = bytes.fromhex(v["hex"].replace(":", ""))
    messages.append((b, msg))

dumps = os.path.join(corpora, "mrtparse-samples", "samples")
for name in sorted(os.listdir(dumps)):
    if not name.endswith("_bgp") and name != "quagga_bgp_large_communities":
        continue
    data = open(os.path.join(dumps, name), "rb").read()
    i = 0
    while i + 12 <= len(data):
        _, ty, st, ln = struct.unpack(">IHHI", data[i:i + 12])
        body = data[i + 12:i + 12 + ln]
        i += 12 + ln
        if ty != 16 or st not in (1, 4, 9):
            continue
        asl = 2 if st == 1 else 4
        afi = struct.unpack(">H", body[2 * asl + 2:2 * asl + 4])[0]
        ipl = 16 if afi == 2 else 4
        msg = body[2 * asl + 4 + 2 * ipl:]
        messages.append((bytes([ctx_byte(True, name.startswith("bird"))]), msg))

for b, msg in messages:
    put("message", b + msg)
    if msg[18] == 2:
        wlen = struct.unpack(">H", msg[19:21])[0]
        alen = struct.unpack(">H", msg[21 + wlen:23 + wlen])[0]
        put("attributes", b + msg[23 + wlen:23 + wlen + alen])

# Streams: consecutive messages of one context, as a session would read them.
for k in range(0, len(messages) - 3, 3):
    b = messages[k][0]
    put("framing", b + b"".join(m for _, m in messages[k:k + 3]))

bad = os.path.join(corpora, "gobgp-bad-len")
for name in sorted(os.listdir(bad)):
    if "." in name or name.startswith("LICENSE"):
        continue
    data = open(os.path.join(bad, name), "rb").read()
    for t in ("framing", "message"):
        put(t, b"\x00" + data)
print("seeds written to", out)
