#!/usr/bin/env python3
"""Look into an OCI image archive without a container runtime.

  oci.py unpack ARCHIVE DIR   verify every blob's digest and size against the manifest, extract
                              the layers in order into DIR (which must be empty or missing),
                              print the image config's labels as JSON.  Whiteouts (.wh.*) are an
                              error: make image only adds files, so one would mean a broken build.
  oci.py sizes ROOT [TOP]     the per-package share of an unpacked Debian root filesystem: bytes
                              of the files each package's dpkg list names that exist in ROOT
                              (dpkg path excludes leave files out), and what no package owns.
Exit status 1 with a message on any inconsistency.
"""
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile


def die(msg):
    print("oci.py: " + msg, file=sys.stderr)
    sys.exit(1)


def blob(tf, desc):
    algo, digest = desc["digest"].split(":", 1)
    member = tf.getmember("blobs/%s/%s" % (algo, digest))
    data = tf.extractfile(member).read()
    if len(data) != desc["size"]:
        die("blob %s: %d bytes, manifest says %d" % (desc["digest"], len(data), desc["size"]))
    if hashlib.new(algo, data).hexdigest() != digest:
        die("blob %s: digest mismatch" % desc["digest"])
    return data


def unpack(archive, dest):
    if os.path.exists(dest) and os.listdir(dest):
        die(dest + " is not empty")
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(archive) as tf:
        index = json.loads(tf.extractfile("index.json").read())
        if len(index.get("manifests", [])) != 1:
            die("index.json lists %d manifests, want 1" % len(index.get("manifests", [])))
        manifest = json.loads(blob(tf, index["manifests"][0]))
        config = json.loads(blob(tf, manifest["config"]))
        diff_ids = config["rootfs"]["diff_ids"]
        if len(diff_ids) != len(manifest["layers"]):
            die("config has %d diff_ids for %d layers" % (len(diff_ids), len(manifest["layers"])))
        for desc, diff_id in zip(manifest["layers"], diff_ids):
            data = blob(tf, desc)
            raw = gzip.decompress(data) if desc["mediaType"].endswith("+gzip") else data
            if "sha256:" + hashlib.sha256(raw).hexdigest() != diff_id:
                die("layer %s: uncompressed digest is not the config's diff_id" % desc["digest"])
            with tarfile.open(fileobj=io.BytesIO(raw)) as layer:
                for m in layer.getmembers():
                    if os.path.basename(m.name).startswith(".wh."):
                        die("layer %s has a whiteout %s" % (desc["digest"], m.name))
                layer.extractall(dest, numeric_owner=True)
    print(json.dumps(config.get("config", {}).get("Labels", {}), sort_keys=True))
    json.dump(config, open(os.path.join(dest + ".config.json"), "w"), indent=1)


def sizes(root, top):
    info = os.path.join(root, "var/lib/dpkg/info")
    owner, seen = {}, set()
    for f in sorted(os.listdir(info)):
        if not f.endswith(".list"):
            continue
        pkg = f[: -len(".list")].split(":")[0]
        total = 0
        for line in open(os.path.join(info, f), encoding="utf-8", errors="replace"):
            p = os.path.join(root, line.rstrip("\n").lstrip("/"))
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
        owner[pkg] = owner.get(pkg, 0) + total
    everything, unowned = 0, []
    for d, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            if (st.st_dev, st.st_ino) in seen:
                everything += st.st_size
                continue
            seen.add((st.st_dev, st.st_ino))
            everything += st.st_size
            unowned.append((st.st_size, os.path.relpath(p, root)))
    rest = sum(s for s, _ in unowned)
    print("%-28s %10s %6s" % ("package", "bytes", "share"))
    rows = sorted(owner.items(), key=lambda kv: -kv[1])
    for pkg, b in rows[:top]:
        print("%-28s %10d %5.1f%%" % (pkg, b, 100.0 * b / everything))
    others = sum(b for _, b in rows[top:])
    print("%-28s %10d %5.1f%%" % ("(%d other packages)" % max(0, len(rows) - top), others, 100.0 * others / everything))
    print("%-28s %10d %5.1f%%" % ("(no package: see below)", rest, 100.0 * rest / everything))
    for s, p in sorted(unowned, reverse=True)[:5]:
        print("    %10d  /%s" % (s, p))
    print("%-28s %10d  (%d packages)" % ("total file bytes", everything, len(rows)))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "unpack":
        unpack(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "sizes":
        sizes(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20)
    else:
        die("usage: oci.py unpack ARCHIVE DIR | oci.py sizes ROOT [TOP]")


if __name__ == "__main__":
    main()
