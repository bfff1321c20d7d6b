#!/usr/bin/env bash
# Installs the Debian packages the Go peers of tests/go/ are built from: grpc-go, and the CNI
# skel for tests/go/antrea_cni (tests/go_peers.py calls this when they are missing; .ci/run calls
# it up front). Quiet, and a no-op when all are installed. Extra package names may be passed as
# arguments (the benchmarks add nghttp2-client for h2load).
set -euo pipefail
packages=(golang-go golang-google-grpc-dev protobuf-compiler golang-goprotobuf-dev
          golang-github-appc-cni-dev "$@")
missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_go_peers: no apt-get; install ${missing[*]} by hand" >&2
    exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
install() { "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
# A fresh machine has no package lists yet: update only when the first try fails.
if ! install 2>/dev/null; then
    "${sudo[@]}" apt-get update -qq >/dev/null
    install
fi
