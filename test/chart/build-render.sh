#!/bin/sh
# Build the chart renderer (test/chart/render) offline from Debian's Go packages:
# golang-go, golang-github-masterminds-sprig-dev, golang-github-ghodss-yaml-dev and
# golang-github-xeipuuv-gojsonschema-dev under /usr/share/gocode (GOPATH mode, no network).
# Sprig and semver are imported by their module paths (.../v3); GOPATH mode resolves them
# through a private directory of links to Debian's copies.  Usage: build-render.sh OUT
# Rebuilds only when a source file is newer than OUT.
set -eu
out=$1
src=$(cd "$(dirname "$0")/render" && pwd)
if [ -x "$out" ] && [ -z "$(find "$src" -newer "$out" -name '*.go')" ]; then
	exit 0
fi
mkdir -p "$(dirname "$out")"
top=$(cd "$(dirname "$out")" && pwd)
gp="$top/chart-gopath/src/github.com/Masterminds"
mkdir -p "$gp/semver" "$gp/sprig"
ln -sfn /usr/share/gocode/src/github.com/Masterminds/semver "$gp/semver/v3"
ln -sfn /usr/share/gocode/src/github.com/Masterminds/sprig "$gp/sprig/v3"
cd "$src"
GO111MODULE=off GOFLAGS= GOENV=off GOPROXY=off GOPATH="$top/chart-gopath:/usr/share/gocode" GOCACHE="$top/go-cache" \
	go build -o "$top/$(basename "$out")" .
