#!/usr/bin/env python3
"""tools/reduce_wheel.py: carry a few files of a large wheel to the device, unchanged and checked.

    python3 tools/reduce_wheel.py reduce WHEEL --keep MEMBER [--keep MEMBER ...] --out DIR
    python3 tools/reduce_wheel.py unpack WHEEL --target DIR

reduce: writes DIR/NAME-VERSION+lowp.reduced-TAGS.whl holding the named members, the
dist-info METADATA and WHEEL, and a RECORD that lists exactly those files with their lines
from the original RECORD (the original sha256 and size), plus the RECORD's own line. Each
kept file's bytes are hashed and compared with its original RECORD line before anything is
written, so the reduced wheel is the original's bytes for what it holds. The members keep
their paths and the dist-info directory keeps its name (NAME-VERSION.dist-info): what
imports them sees the original version; only the file name says "+lowp.reduced". Why: the
device's carry limit (64 MiB for the whole tree) does not fit sglang 0.5.23's 39 MB wheel,
whose decode-attention kernel is 76 KB of it.

unpack: for a wheel pip will not install (its tags name another Python, or the reduced
name's version differs from its METADATA's): checks every member against the wheel's
RECORD (each listed with a sha256 that matches, nothing unlisted but RECORD itself, no
absolute path or ..) and only then extracts all of them under DIR. No pip metadata
(INSTALLER, scripts) is made: DIR is a PYTHONPATH entry, not an environment.

Exit 0, or 2 with one line on stderr (bad usage, a missing member, a hash or size that
does not match, a path that leaves DIR); nothing is written on failure (reduce writes a
temporary file and renames it; unpack checks all members before extracting any).
"""
import argparse
import base64
import csv
import hashlib
import os
import sys
import tempfile
import zipfile


class Bad(Exception):
    """One line for stderr, exit 2."""


def record_hash(data):
    """The RECORD hash field of data (PEP 376 / the wheel spec: sha256, urlsafe base64
    without '=' padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def read_record(z, wheel):
    """(dist-info dir, RECORD member name, {path: (hash, size, the line)}) of an open wheel.
    RECORD is CSV, one row a line (path,hash,size; a path with a comma is quoted): each line
    is parsed alone and kept as it is, so a reduced RECORD repeats the original lines."""
    recs = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    if len(recs) != 1:
        raise Bad("%s: %d dist-info/RECORD members (expected one)" % (wheel, len(recs)))
    rows = {}
    for line in z.read(recs[0]).decode("utf-8").splitlines():
        if not line.strip():
            continue
        row = next(csv.reader([line]))
        if len(row) != 3:
            raise Bad("%s: a RECORD line of %d fields (expected 3): %r" % (wheel, len(row), line[:120]))
        rows[row[0]] = (row[1], row[2], line)
    return recs[0].split("/")[0], recs[0], rows


def check_member(z, wheel, name, rows):
    """The bytes of member name, after its RECORD line's hash and size are checked."""
    if name not in rows:
        raise Bad("%s: %s is not listed in RECORD" % (wheel, name))
    h, size, _ = rows[name]
    if not h.startswith("sha256="):
        raise Bad("%s: %s has no sha256 in RECORD (%r)" % (wheel, name, h))
    data = z.read(name)
    if record_hash(data) != h or (size and int(size) != len(data)):
        raise Bad("%s: %s does not match its RECORD line (sha256 or size)" % (wheel, name))
    return data


def reduce(wheel, keep, out):
    base = os.path.basename(wheel)
    parts = base[:-len(".whl")].split("-") if base.endswith(".whl") else []
    if len(parts) not in (5, 6):
        raise Bad("%s: not a wheel file name (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl)" % wheel)
    with zipfile.ZipFile(wheel) as z:
        info, rec, rows = read_record(z, wheel)
        names = list(dict.fromkeys(list(keep) + [info + "/METADATA", info + "/WHEEL"]))
        files = [(n, check_member(z, wheel, n, rows)) for n in names]
    parts[1] += "+lowp.reduced"
    dst = os.path.join(out, "-".join(parts) + ".whl")
    record = "".join(rows[n][2] + "\n" for n, _ in files) + rec + ",,\n"
    os.makedirs(out, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out, suffix=".whl.part")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w") as w:
            for n, data in files + [(rec, record.encode("utf-8"))]:
                zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))  # the same bytes every run
                zi.compress_type, zi.external_attr = zipfile.ZIP_DEFLATED, 0o100644 << 16  # a regular file, rw-r--r--
                w.writestr(zi, data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is not a wheel's mode
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print("reduce_wheel: %s (%d bytes): %d files of %s, each matching its original RECORD line" %
          (dst, os.path.getsize(dst), len(files), base))


def unpack(wheel, target):
    with zipfile.ZipFile(wheel) as z:
        _, rec, rows = read_record(z, wheel)
        members = [n for n in z.namelist() if not n.endswith("/")]
        for n in members:
            if n.startswith("/") or ".." in n.split("/") or "\\" in n:
                raise Bad("%s: member %r leaves the target" % (wheel, n))
            if n != rec:
                check_member(z, wheel, n, rows)
        for n in members:
            z.extract(n, target)
    print("reduce_wheel: %s unpacked into %s: %d files, each checked against its RECORD" %
          (os.path.basename(wheel), target, len(members) - 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reduce", help="write a reduced copy of WHEEL")
    r.add_argument("wheel")
    r.add_argument("--keep", action="append", required=True, help="a member path to keep (repeat)")
    r.add_argument("--out", required=True)
    u = sub.add_parser("unpack", help="check WHEEL against its RECORD, then extract it")
    u.add_argument("wheel")
    u.add_argument("--target", required=True)
    a = ap.parse_args()
    try:
        if a.cmd == "reduce":
            reduce(a.wheel, a.keep, a.out)
        else:
            unpack(a.wheel, a.target)
    except (Bad, OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError, csv.Error) as e:
        print("reduce_wheel: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
