#!/usr/bin/env bash
# Builds image $1 FROM nothing: the nats-server binary $2 (scripts/nats.sh builds it with cgo off,
# so it needs nothing but the kernel) and a static busybox so that a healthcheck can run `wget`.
# Skips when the image exists (its tag names the server's version).
# No EXPOSE: podman lists unmapped exposed ports as bindings, and testcontainers then waits for
# them to be bound until it times out.
set -euo pipefail
image="$1"
binary="$2"
if podman image exists "$image"; then exit 0; fi
echo "containers: building $image from $binary" >&2
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/sbin" "$root/bin" "$root/data" "$root/etc/nats"
mkdir -m 1777 "$root/tmp"
cp "$binary" "$root/usr/sbin/nats-server"
cp /bin/busybox "$root/bin/"
for applet in sh wget; do ln -s busybox "$root/bin/$applet"; done
tar -C "$root" -c . | podman import --quiet \
  --change 'ENTRYPOINT ["/usr/sbin/nats-server"]' \
  --change 'ENV PATH=/usr/sbin:/bin' \
  - "$image" >/dev/null
