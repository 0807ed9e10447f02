#!/bin/sh
# Builds a test driver against the library as the Makefile builds it:
#   lib-link.sh san|rel OUT ARG...
# makes $BUILD/<kind>/lib.a with the Makefile's own rules (every library source as it is now: a
# new file under src/ or roles/ needs no list here), compiles ARG... (the driver's sources and any
# extra -I flags) with the Makefile's flags of that kind (san: CFLAGS_SAN, ASan+UBSan as the unit
# tests; rel: CFLAGS_REL, as the shipped binary) and links OUT with the archive and the Makefile's
# DYN_LIBS.  The linker takes from the archive only the objects the driver uses.
# Env: BUILD (the Makefile's build directory).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD:?BUILD must be set}"
kind=$1 out=$2
shift 2
case $kind in
san) flags=CFLAGS_SAN ;;
rel) flags=CFLAGS_REL ;;
*) echo "lib-link.sh: kind must be san or rel, not $kind" >&2; exit 2 ;;
esac
# the Makefile's paths are relative to its directory; its header dependencies (*.d) name the
# objects that way, so a build directory inside the tree is passed to make relative to it
case $BUILD in
"$ROOT"/*) build=${BUILD#"$ROOT"/} ;;
*) build=$BUILD ;;
esac
# started by a suite, not by make's recipe: the parent make's job slots are not ours
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$ROOT" --no-print-directory BUILD="$build" "$@"; }
mk "$build/$kind/lib.a" >&2
vars=$(mk -s print-CC "print-$flags" print-DYN_LIBS)
cc=$(printf '%s\n' "$vars" | sed -n 1p)
cflags=$(printf '%s\n' "$vars" | sed -n 2p)
libs=$(printf '%s\n' "$vars" | sed -n 3p)
cd "$ROOT"
# shellcheck disable=SC2086 # flag lists are word lists
$cc $cflags -o "$out" "$@" "$build/$kind/lib.a" $libs
