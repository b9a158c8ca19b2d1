#!/usr/bin/env bash
# Prints the path of the MCP Inspector's CLI launcher (@modelcontextprotocol/inspector, version
# $1, default 2.12.0), installed once into a cache outside the repository: it is not a
# dependency of the project (120 packages, ~57 MB), and test/system/mcp-inspector.test.ts runs it
# from MCP_INSPECTOR_CLI.
#
#   MCP_INSPECTOR_CLI="$(scripts/inspector.sh)" npm test
#
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail
version="${1:-2.12.0}"
readonly cache="${MATRIX_INSPECTOR_CACHE:-/var/cache/matrix-tool-registry/inspector}/$version"
launcher="$cache/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
if [ ! -f "$launcher" ]; then
  echo "inspector: installing @modelcontextprotocol/inspector@$version into $cache" >&2
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --no-save --loglevel=error \
    "@modelcontextprotocol/inspector@$version" >&2
fi
echo "$launcher"
