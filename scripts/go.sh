#!/usr/bin/env bash
# Prints the directory of a `go` command new enough to build the NATS tools (scripts/nats.sh) and
# the Go micro test's service (Go 1.24 or newer), as scripts/node.sh does for Node:
#
#   PATH="$(scripts/go.sh):$PATH"
#
# The machine's `go` when it is new enough. Otherwise Go's own toolchain, the module
# golang.org/toolchain@v0.0.1-go<version>.<os>-<arch> (what `GOTOOLCHAIN` switching fetches),
# downloaded through the Go module proxy by whatever `go` there is (Debian bookworm's golang-go is
# 1.19, installed when there is none) into a cache outside the repository.
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail
readonly version="${MATRIX_GO_VERSION:-1.26.8}"
readonly cache="${MATRIX_GO_CACHE:-/var/cache/matrix-tool-registry/go}/go$version"

# Is the `go` at $1 Go 1.24 or newer?
new_enough() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  local major="${v%%.*}" rest="${v#*.}"
  local minor="${rest%%[^0-9]*}"
  [ "$major" -gt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -ge 24 ]; }
}

if command -v go >/dev/null 2>&1 && new_enough "$(command -v go)"; then
  dirname "$(command -v go)"
  exit 0
fi
if [ -x "$cache/bin/go" ]; then
  echo "$cache/bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "go: installing Debian's golang-go, to fetch Go $version with" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends golang-go ca-certificates >&2
fi

case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "$0: no Go toolchain module for $(uname -m)" >&2; exit 1 ;;
esac
module="golang.org/toolchain@v0.0.1-go$version.linux-$arch"
echo "go: downloading $module into $cache" >&2
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# Its own module cache, so that the copy below is the only one kept.
dir="$(cd "$work" && GOPATH="$work/gopath" GOFLAGS=-modcacherw GO111MODULE=on \
  go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -x "$dir/bin/go" ] || [ -f "$dir/bin/go" ] || { echo "$0: $module has no bin/go" >&2; exit 1; }
mkdir -p "$(dirname "$cache")"
cp -a "$dir" "$cache.partial"
# A module zip keeps no file modes: the commands are made executable, as Go's own switch does.
chmod +x "$cache.partial"/bin/* "$cache.partial"/pkg/tool/*/*
mv "$cache.partial" "$cache"
"$cache/bin/go" version >&2
echo "$cache/bin"
