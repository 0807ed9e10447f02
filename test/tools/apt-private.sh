#!/bin/sh
# A private apt configuration over this machine's own Debian sources, so that nothing on the
# machine changes: DIR/apt/{sources.list,sources.d/,lists/,cache/}.  MODE deb-src: the sources
# as deb-src (fetch-cjson.sh); contrib: the binary sources with the contrib component added
# (test/e2e/zfs-build.sh).  Prints the apt options that select it, on one line.
# Usage: apt-private.sh DIR deb-src|contrib
set -eu
dir=$1
case $2 in
deb-src) s822='s/^Types:.*$/Types: deb-src/' s1='s/^deb \(.*\)$/deb-src \1/p' ;;
contrib) s822='/^Components:/{/contrib/!s/$/ contrib/;}' s1='/^deb .* main/{/ contrib/!s/ main/ main contrib/;p;}' ;;
*) echo "apt-private.sh: unknown mode '$2'" >&2 && exit 2 ;;
esac
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/sources.d"
abs=$(cd "$dir" && pwd)
rm -f "$abs"/apt/sources.d/*
: >"$abs/apt/sources.list"
# deb822 sources (*.sources), then one-line sources
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	sed -e "$s822" "$f" >"$abs/apt/sources.d/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	sed -n -e "$s1" "$f" >>"$abs/apt/sources.list"
done
echo "-o Dir::Etc::SourceList=$abs/apt/sources.list -o Dir::Etc::SourceParts=$abs/apt/sources.d" \
	"-o Dir::State::Lists=$abs/apt/lists -o Dir::Cache=$abs/apt/cache -o APT::Sandbox::User=root"
