#!/usr/bin/env bash
# Prints the path of a NATS tool's binary, built once from its Go module into a cache outside the
# repository, as scripts/node.sh does for Node:
#
#   scripts/nats.sh server 2.15.3      # nats-server  (github.com/nats-io/nats-server/v2)
#   scripts/nats.sh cli 0.5.0          # nats, natscli (github.com/nats-io/natscli/nats)
#   scripts/nats.sh nsc 2.12.0         # nsc           (github.com/nats-io/nsc/v2)
#
#   NATS_SERVER_BIN="$(scripts/nats.sh server 2.15.3)" npm test
#
# VERSION may also name one of test/harness/nats-tools.ts's `NatsVersion` (newest, oldest,
# affected, cli, nsc), the one list of the versions the project tests:
#
#   scripts/nats.sh server newest      # the release the whole suite and the NATS image run
#
# Each version builds into its own folder (cgo off, so the binary needs nothing but the kernel);
# the module cache is Go's own. Progress goes to stderr; stdout carries only the path.
set -euo pipefail
tool="${1:?usage: $0 server|cli|nsc VERSION}"
version="${2:?usage: $0 server|cli|nsc VERSION}"
if [[ "$version" =~ ^[a-z]+$ ]]; then
  named="$version"
  version="$(sed -n "s/^  $named: '\([^']*\)',\$/\1/p" "$(dirname "$0")/../test/harness/nats-tools.ts")"
  [ -n "$version" ] || { echo "$0: test/harness/nats-tools.ts's NatsVersion names no '$named'" >&2; exit 2; }
fi
version="${version#v}"
case "$tool" in
  server) module="github.com/nats-io/nats-server/v2"; name=nats-server ;;
  cli) module="github.com/nats-io/natscli/nats"; name=nats ;;
  nsc) module="github.com/nats-io/nsc/v2"; name=nsc ;;
  *) echo "$0: unknown tool '$tool' (server, cli or nsc)" >&2; exit 2 ;;
esac
readonly dir="${MATRIX_NATS_CACHE:-/var/cache/matrix-tool-registry/nats}/$name-$version"

if [ ! -x "$dir/$name" ]; then
  command -v go >/dev/null 2>&1 || { echo "$0: needs Go (1.24 or newer) to build $module" >&2; exit 1; }
  echo "nats: building $module@v$version into $dir" >&2
  # A throwaway module that requires the release: `go install module@version` would also ask the
  # proxy for the module's version list (deprecations), which some proxies refuse for nsc.
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init matrix-tool-registry/nats-tools >/dev/null 2>&1
    go get "$module@v$version" >&2
    mkdir -p "$dir"
    CGO_ENABLED=0 go build -trimpath -o "$dir/$name" "$module" >&2
  )
fi
echo "$dir/$name"
