#!/usr/bin/env bash
# Builds h2spec (summerwind/h2spec, HTTP/2 conformance) from a checkout of its source, in GOPATH
# mode on Debian's Go packages, for `make h2spec` and tests/interop/test_h2spec.py. Nothing of
# h2spec is kept in this repository, and nothing here downloads it: pass the directory of a clone.
#
#   tools/build_h2spec.sh <h2spec source dir> [output binary]
#
# The binary goes to the given path, by default ${XDG_CACHE_HOME:-~/.cache}/minigrpc/h2spec;
# then `make h2spec H2SPEC=<that path>`. Installs the Go packages it needs when missing (as
# tools/install_go_peers.sh does for the Go peers).
set -euo pipefail
source_dir=${1:?usage: tools/build_h2spec.sh <h2spec source dir> [output binary]}
output=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/minigrpc/h2spec}
[ -f "$source_dir/cmd/h2spec/h2spec.go" ] || {
    echo "build_h2spec: $source_dir is not an h2spec source tree (no cmd/h2spec/h2spec.go)" >&2
    exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/install_go_peers.sh" golang-golang-x-net-dev golang-github-spf13-cobra-dev \
    golang-github-fatih-color-dev
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/github.com/summerwind"
cp -r "$source_dir" "$gopath/src/github.com/summerwind/h2spec"
mkdir -p "$(dirname "$output")"
output=$(cd "$(dirname "$output")" && pwd)/$(basename "$output")
cd "$gopath/src/github.com/summerwind/h2spec"
# The version and commit its own Makefile stamps in, so that reports name what ran.
version=$(sed -n 's/^VERSION=//p' Makefile)
commit=$(git rev-parse --verify HEAD 2>/dev/null || echo unknown)
GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" go build \
    -ldflags "-X main.VERSION=${version:-unknown} -X main.COMMIT=$commit" -o "$output" ./cmd/h2spec
echo "build_h2spec: $output"
