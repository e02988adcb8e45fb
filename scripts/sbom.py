#!/usr/bin/env python3
"""CycloneDX 1.5 SBOM of the `holdfast` binary, on standard output.

    scripts/sbom.py --version V --commit C --source URL TRIPLE...

What the binary links, for each target triple given (scripts/release.sh:
x86_64 and aarch64 musl): from `cargo metadata --filter-platform`, the
crates reached from holdfast's binary through normal dependencies, with the
features Cargo resolved. Not in it: build dependencies and proc-macro
crates (and what only they use), which run at build time and are not
shipped. Each crate from crates.io carries the SHA-256 of its package from
Cargo.lock; workspace crates carry the commit. Deterministic: the
timestamp is $SOURCE_DATE_EPOCH, the serial number derives from the
commit and the content, the lists are sorted.
"""

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tomllib
import uuid


def metadata(triple):
    out = subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", triple],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def shipped(meta):
    """Package ids linked into holdfast's binary, with each one's normal
    dependencies among them."""
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}

    def is_proc_macro(pid):
        return any("proc-macro" in t["kind"] for t in pkgs[pid]["targets"])

    root = next(p["id"] for p in meta["packages"] if p["name"] == "holdfast" and p["source"] is None)
    seen, edges, todo = set(), {}, [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        deps = set()
        for d in nodes[pid]["deps"]:
            normal = any(k["kind"] is None for k in d["dep_kinds"])
            if normal and not is_proc_macro(d["pkg"]):
                deps.add(d["pkg"])
                todo.append(d["pkg"])
        edges[pid] = deps
    features = {pid: sorted(nodes[pid]["features"]) for pid in seen}
    return root, pkgs, edges, features


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("triples", nargs="+")
    a = ap.parse_args()

    with open("Cargo.lock", "rb") as f:
        lock = tomllib.load(f)
    checksum = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}

    def ref(pkg):
        return f"pkg:cargo/{pkg['name']}@{pkg['version']}"

    components, dependencies, targets_of = {}, {}, {}
    root_ref = None
    for triple in a.triples:
        root, pkgs, edges, features = shipped(metadata(triple))
        root_ref = ref(pkgs[root])
        for pid, deps in edges.items():
            pkg = pkgs[pid]
            r = ref(pkg)
            targets_of.setdefault(r, set()).add(triple)
            dependencies.setdefault(r, set()).update(ref(pkgs[d]) for d in deps)
            if pid == root:
                continue
            c = components.setdefault(
                r,
                {
                    "type": "library",
                    "bom-ref": r,
                    "name": pkg["name"],
                    "version": pkg["version"],
                    "purl": r,
                    "scope": "required",
                },
            )
            if pkg.get("license"):
                c["licenses"] = [{"expression": pkg["license"]}]
            if pkg.get("description"):
                c["description"] = " ".join(pkg["description"].split())
            sha = checksum.get((pkg["name"], pkg["version"]))
            if sha:
                c["hashes"] = [{"alg": "SHA-256", "content": sha}]
            if pkg["source"] is None:
                c["properties"] = [{"name": "holdfast:workspace-crate", "value": a.commit}]
            c.setdefault("_features", {})[triple] = features[pid]

    for r, c in components.items():
        props = c.setdefault("properties", [])
        feats = c.pop("_features")
        for triple in a.triples:
            if triple in feats:
                props.append(
                    {"name": f"cargo:features:{triple}", "value": ",".join(feats[triple]) or "(none)"}
                )
        if targets_of[r] != set(a.triples):
            props.append({"name": "cargo:targets", "value": ",".join(sorted(targets_of[r]))})

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    timestamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "components": sorted(components.values(), key=lambda c: c["bom-ref"]),
        "dependencies": [
            {"ref": r, "dependsOn": sorted(d)} for r, d in sorted(dependencies.items())
        ],
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"holdfast:{a.version}:{a.commit}:{digest}")
    main_component = {
        "type": "application",
        "bom-ref": root_ref,
        "name": "holdfast",
        "version": a.version,
        "purl": root_ref,
        "licenses": [{"expression": "Apache-2.0"}],
        "properties": [
            {"name": "holdfast:commit", "value": a.commit},
            {"name": "holdfast:targets", "value": ",".join(a.triples)},
        ],
    }
    if a.source != "unknown":
        main_component["externalReferences"] = [{"type": "vcs", "url": a.source}]
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": timestamp,
            "tools": {
                "components": [
                    {"type": "application", "name": "holdfast scripts/sbom.py (from cargo metadata)"}
                ]
            },
            "component": main_component,
        },
        **body,
    }
    json.dump(bom, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
