#!/usr/bin/env bash
# Builds image $1, a stand-in for node:24-bookworm-slim: a minimal Debian bookworm from
# debootstrap, the node binary $2 (scripts/node.sh gives one; Debian's own nodejs is 18), this
# machine's npm, its CA bundle (TLS to the npm registry is re-signed on the way here) and a `node`
# user, as in the official image.
# Skips when the image exists; keeps debootstrap's downloads between runs.
set -euo pipefail
image="$1"
node_bin="${2:?usage: $0 IMAGE NODE_BINARY}"
if podman image exists "$image"; then exit 0; fi
echo "containers: building $image" >&2
readonly cache=/var/cache/matrix-tool-registry/debootstrap
readonly mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$cache"
debootstrap --variant=minbase --cache-dir="$cache" bookworm "$root" "$mirror" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

cp "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules"
cp -a "$(dirname "$(readlink -f "$(command -v npm)")")/.." "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"

echo 'node:x:1000:1000::/home/node:/bin/bash' >>"$root/etc/passwd"
echo 'node:x:1000:' >>"$root/etc/group"
mkdir -p "$root/home/node" && chown 1000:1000 "$root/home/node"

tar -C "$root" -c . | podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' \
  - "$image" >/dev/null
