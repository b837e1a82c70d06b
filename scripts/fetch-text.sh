#!/usr/bin/env bash
# Fetches the perplexity corpus: the Debian Policy Manual 4.6.2.0 as plain text (479,229 bytes,
# English prose with lists and some code; DFSG-free), /usr/share/doc/debian-policy/policy.txt.gz
# of Debian bookworm's `debian-policy` 4.6.2.0 package, into .cache/text/ (ignored; never
# committed), checks its sha256 and prints its path. A pinned package version from the distro
# archive, not a web page: the same bytes on every machine. Uses `apt-get download` (no install;
# needs bookworm's package lists: refreshed with `apt-get update`, as root, if the first try
# fails). Idempotent: a file already there with the right checksum is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.cache/text
txt=$dir/debian-policy-4.6.2.0.txt
sha=89dba06600463ed858b4ccd3bdf4e72452c512589f1029548346e5284eb71374
ok() { [ -f "$txt" ] && echo "$sha  $txt" | sha256sum -c --status; }
if ok; then echo "$txt"; exit 0; fi
mkdir -p "$dir"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# (as root, apt warns that it downloads "unsandboxed" because _apt cannot write to $tmp: harmless)
echo "fetch-text: downloading Debian package debian-policy 4.6.2.0 (2.3 MB), once" >&2
deb=$tmp/debian-policy_4.6.2.0_all.deb
(cd "$tmp" && { apt-get -qq download debian-policy=4.6.2.0 || { apt-get update -qq && apt-get -qq download debian-policy=4.6.2.0; }; }) >&2 ||
  # a release whose lists lack bookworm's version (or no apt): the same file from the archive's
  # pool, checked by its own sha256
  { curl -fsSL -o "$deb" http://deb.debian.org/debian/pool/main/d/debian-policy/debian-policy_4.6.2.0_all.deb &&
    echo "ef9d01b625c3b87c3a845c2cd1b66f1a16e9240b2b9e5bee53472a00e8457a39  $deb" | sha256sum -c --status; } ||
  { echo "fetch-text: cannot download debian-policy 4.6.2.0 (apt-get download, then deb.debian.org's pool)" >&2; exit 1; }
dpkg-deb --fsys-tarfile "$deb" \
  | tar -xO ./usr/share/doc/debian-policy/policy.txt.gz | gunzip >"$txt.part"
mv "$txt.part" "$txt"
ok || { echo "fetch-text: $txt has sha256 $(sha256sum "$txt" | cut -d' ' -f1), not $sha" >&2; exit 1; }
echo "$txt"
