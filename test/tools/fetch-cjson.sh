#!/bin/sh
# Fetch and unpack Debian's own `cjson` source package into DIR/src, with Debian's patches
# applied.  A private apt configuration enables deb-src for this machine's own Debian sources,
# so nothing on the machine is changed.  Usage: fetch-cjson.sh DIR
set -eu
dir=$1
rm -rf "$dir"
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/sources.d" "$dir/pkg"
# deb822 sources: turn "Types: deb" into "Types: deb-src"; one-line sources: "deb " -> "deb-src ".
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	sed -e 's/^Types:.*$/Types: deb-src/' "$f" >"$dir/apt/sources.d/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	sed -n -e 's/^deb \(.*\)$/deb-src \1/p' "$f" >>"$dir/apt/sources.list"
done
touch "$dir/apt/sources.list"
abs=$(cd "$dir" && pwd)
aptq="apt-get -q -o Dir::Etc::SourceList=$abs/apt/sources.list -o Dir::Etc::SourceParts=$abs/apt/sources.d \
 -o Dir::State::Lists=$abs/apt/lists -o Dir::Cache=$abs/apt/cache -o APT::Sandbox::User=root"
$aptq update >"$dir/apt-update.log" 2>&1 || { cat "$dir/apt-update.log" >&2; exit 1; }
(cd "$dir/pkg" && $aptq source --download-only cjson) >"$dir/apt-source.log" 2>&1 ||
	{ cat "$dir/apt-source.log" >&2; exit 1; }
dsc=$(ls "$dir"/pkg/cjson_*.dsc | head -n 1)
dpkg-source --no-check -x "$dsc" "$dir/src" >"$dir/dpkg-source.log" 2>&1 ||
	{ cat "$dir/dpkg-source.log" >&2; exit 1; }
test -f "$dir/src/cJSON.c"
echo "cjson: $(basename "$dsc" .dsc) unpacked in $dir/src"
