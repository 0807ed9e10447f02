#!/bin/sh
# Fetch and unpack Debian's own `cjson` source package into DIR/src, with Debian's patches
# applied.  A private apt configuration (apt-private.sh) enables deb-src for this machine's own
# Debian sources, so nothing on the machine is changed.  Usage: fetch-cjson.sh DIR
set -eu
dir=$1
rm -rf "$dir"
mkdir -p "$dir/pkg"
aptq="apt-get -q $(sh "$(dirname "$0")/apt-private.sh" "$dir" deb-src)"
$aptq update >"$dir/apt-update.log" 2>&1 || { cat "$dir/apt-update.log" >&2; exit 1; }
(cd "$dir/pkg" && $aptq source --download-only cjson) >"$dir/apt-source.log" 2>&1 ||
	{ cat "$dir/apt-source.log" >&2; exit 1; }
dsc=$(ls "$dir"/pkg/cjson_*.dsc | head -n 1)
dpkg-source --no-check -x "$dsc" "$dir/src" >"$dir/dpkg-source.log" 2>&1 ||
	{ cat "$dir/dpkg-source.log" >&2; exit 1; }
test -f "$dir/src/cJSON.c"
echo "cjson: $(basename "$dsc" .dsc) unpacked in $dir/src"
