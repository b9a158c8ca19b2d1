#!/usr/bin/env bash
# Builds image $1 FROM nothing: Debian's nats-server (it links only libc), its loader, and a
# static busybox so that a healthcheck can run `wget`. Skips when the image exists.
# No EXPOSE: podman lists unmapped exposed ports as bindings, and testcontainers then waits for
# them to be bound until it times out.
set -euo pipefail
image="$1"
if podman image exists "$image"; then exit 0; fi
echo "containers: building $image" >&2
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/sbin" "$root/bin" "$root/lib64" "$root/lib/x86_64-linux-gnu" "$root/data" "$root/etc/nats"
mkdir -m 1777 "$root/tmp"
cp /usr/sbin/nats-server "$root/usr/sbin/"
cp -L /lib/x86_64-linux-gnu/libc.so.6 "$root/lib/x86_64-linux-gnu/"
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
cp /bin/busybox "$root/bin/"
for applet in sh wget; do ln -s busybox "$root/bin/$applet"; done
tar -C "$root" -c . | podman import --quiet \
  --change 'ENTRYPOINT ["/usr/sbin/nats-server"]' \
  --change 'ENV PATH=/usr/sbin:/bin' \
  - "$image" >/dev/null
