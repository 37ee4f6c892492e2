#!/usr/bin/env bash
# Fetches the evaluation text into eval/data/ (git-ignored): Jane Austen's
# "Pride and Prejudice" as the Debian package r-cran-janeaustenr 1.0.0-1 ships it
# (an R lazy-load database: an XDR-serialized character vector, one element per
# line, zlib-compressed). The lines are joined with "\n" plus a final "\n".
# Verifies the package's and the text's SHA-256. Never needed by `make check`.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=eval/data
text=$dest/pride-and-prejudice.txt
deb_sha=df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95
text_sha=dfc684d4f857fa938268f9ab9c5567b64bd0691251eca959644adeabe6287a4d
if [ -f "$text" ] && echo "$text_sha  $text" | sha256sum -c --quiet - 2>/dev/null; then
    echo "text present: $text"; exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && { apt-get download r-cran-janeaustenr=1.0.0-1 >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get download r-cran-janeaustenr=1.0.0-1 >/dev/null; }; } )
deb=$tmp/r-cran-janeaustenr_1.0.0-1_all.deb
echo "$deb_sha  $deb" | sha256sum -c --quiet - || { echo "fetch-text: package SHA-256 mismatch" >&2; exit 1; }
dpkg-deb -x "$deb" "$tmp/x"
python3 - "$tmp/x/usr/lib/R/site-library/janeaustenr/data" "$text" <<'PY'
# R's lazy-load database: Rdata.rdx (gzip) holds a serialized list whose
# "variables" entry maps each object name to (offset, length) in Rdata.rdb; each
# record there is a 4-byte big-endian length and a zlib stream holding one
# serialized object. The book is a STRSXP (type 16): a 4-byte count, then per
# element a CHARSXP (flags, 4-byte length, bytes; length -1 is NA).
import gzip, struct, sys, zlib
d, out = sys.argv[1], sys.argv[2]
idx = gzip.decompress(open(d + "/Rdata.rdx", "rb").read())
key = b"prideprejudice"
# The offsets are an INTSXP of length 2 in the order of the names vector; find
# the position of the name among the variable names and read the matching pair.
names = [b"emma", b"mansfieldpark", b"northangerabbey", b"persuasion", b"prideprejudice", b"sensesensibility"]
pairs, p = [], 0
while len(pairs) < len(names):
    p = idx.index(b"\x00\x00\x00\x0d\x00\x00\x00\x02", p) + 8
    pairs.append(struct.unpack(">ii", idx[p:p + 8]))
for nm in names:
    assert idx.find(b"\x00\x04\x00\x09" + struct.pack(">i", len(nm)) + nm) > 0, nm
off, ln = pairs[names.index(key)]
rec = open(d + "/Rdata.rdb", "rb").read()[off:off + ln]
blob = zlib.decompress(rec[4:])
assert blob[:2] == b"X\n"
p = 14
nelen = struct.unpack(">i", blob[p:p + 4])[0]
p += 4 + nelen
flags, count = struct.unpack(">ii", blob[p:p + 8])
assert flags & 0xFF == 16, "not a character vector"
p += 8
lines = []
for _ in range(count):
    f, l = struct.unpack(">ii", blob[p:p + 8])
    p += 8
    if l < 0:
        lines.append("")
        continue
    lines.append(blob[p:p + l].decode("utf-8"))
    p += l
open(out, "w", encoding="utf-8", newline="\n").write("\n".join(lines) + "\n")
PY
echo "$text_sha  $text" | sha256sum -c --quiet - || { echo "fetch-text: text SHA-256 mismatch" >&2; rm -f "$text"; exit 1; }
echo "text fetched: $text (sha256 $text_sha)"
