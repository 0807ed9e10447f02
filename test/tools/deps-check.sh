#!/bin/sh
# deps-check — `make deps` installs a Debian package for every program and library the unit,
# interop and bench suites run (the table below: what runs, the package that provides it), so a
# fresh machine has them after the README's `make deps`.  Also where no kubectl is installed
# (the Makefile made to look for a program that does not exist): then Debian's kubernetes-client
# is in the list.
# Exit 1, naming each missing package, when the list lacks one.  Run by `make unit`.
set -eu
cd "$(dirname "$0")/../.."
make=$(command -v make)
list=" $("$make" -s --no-print-directory deps-list) "
bare=" $("$make" -s --no-print-directory deps-list KUBECTL_PROGRAM=pillar-csi-no-such-kubectl) "
fail=0
while read -r what pkg; do
	case "$what" in '#'* | '') continue ;; esac
	case "$list" in *" $pkg "*) ;; *)
		echo "deps-check: $what needs the Debian package $pkg, which make deps does not install"
		fail=1 ;;
	esac
done <<'TABLE'
# program or library    package
cc                      gcc
protoc-c                protobuf-c-compiler
checkmk-library         check
protoc                  protobuf-compiler
grpc_cpp_plugin         protobuf-compiler-grpc
grpc++                  libgrpc++-dev
python3-grpc            python3-grpcio
python3-hypercorn       python3-hypercorn
python3-h2              python3-h2
python3-yaml            python3-yaml
python3-jwt             python3-jwt
h2load                  nghttp2-client
curl                    curl
openssl                 openssl
valgrind                valgrind
jq                      jq
ip                      iproute2
etcd                    etcd-server
promtool                prometheus
strace                  strace
perf                    linux-perf
clang                   clang
go                      golang-go
sprig                   golang-github-masterminds-sprig-dev
ghodss-yaml             golang-github-ghodss-yaml-dev
gojsonschema            golang-github-xeipuuv-gojsonschema-dev
mmdebstrap              mmdebstrap
buildah                 buildah
TABLE
case "$bare" in *" kubernetes-client "*) ;; *)
	echo "deps-check: with no kubectl installed, make deps does not install kubernetes-client"
	fail=1 ;;
esac
[ "$fail" = 0 ] && echo "deps-check: make deps installs every package the suites need"
exit "$fail"
