#!/usr/bin/env bash
# Makes a Debian bookworm machine without Docker able to run this project's containers:
# podman and runc from Debian, a containers.conf that works without CAP_SYS_RESOURCE and on
# hybrid cgroups, podman's Docker-compatible API service, and local builds of the two images
# the project uses (no image registry is reachable here, so nothing is pulled): NATS from the
# nats-server NATS_SERVER_BIN names, default the newest the project tests (scripts/nats.sh).
#
#   eval "$(scripts/containers.sh)"    # set up (idempotent), then export what the tests need
#   scripts/containers.sh env          # only print the exports (after a setup)
#
# Progress goes to stderr; stdout carries only `export` lines.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
readonly socket=/run/podman/podman.sock
readonly pidfile=/run/podman/matrix-service.pid
log() { echo "containers: $*" >&2; }

# `apt-get install` of the packages not installed; waits for another apt run (shared machines).
install_missing() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # An apt index older than the Debian mirror's files fails with 404: refresh it first.
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  # --no-install-recommends: docker-compose would otherwise bring docker.io and its daemon.
  local out
  out="$(mktemp)"
  if ! apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >"$out" 2>&1; then
    cat "$out" >&2
    return 1
  fi
  rm -f "$out"
}

# crun cannot run on hybrid cgroups, and no runtime may raise RLIMIT_NOFILE/NPROC past this
# machine's hard limits (no CAP_SYS_RESOURCE): runc, and default limits inside them.
write_config() {
  local conf=/etc/containers/containers.conf want
  want="$(printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n\n[network]\nnetwork_backend = "netavark"\n' \
    "$(hard_limit n)" "$(hard_limit n)" "$(nproc_limit)" "$(nproc_limit)")"
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    log "writing $conf (runc, limits inside this machine's hard limits)"
    mkdir -p /etc/containers
    printf '%s\n' "$want" >"$conf"
    # A service started before reads the old file: stop it, start_service starts it anew.
    if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"; sleep 1; fi
  fi
}

# The hard limit of `ulimit -H<letter>`, a number even when it is unlimited.
hard_limit() {
  local v
  v="$(ulimit -H"$1")"
  if [ "$v" = unlimited ]; then echo 1048576; else echo "$v"; fi
}

# podman lowers its own process limit to 32768, and runc runs under it (measured: 32769 fails).
nproc_limit() {
  local v
  v="$(hard_limit u)"
  if [ "$v" -gt 32768 ]; then echo 32768; else echo "$v"; fi
}

# A bridge left by CNI (podman's network backend before netavark was installed) keeps a route to
# 10.88.0.0/16, netavark's default subnet too: ports published from there answer "no route to host".
remove_cni_bridge() {
  if ip link show cni-podman0 >/dev/null 2>&1; then
    log "removing cni-podman0, a bridge of the CNI backend that shadows netavark's subnet"
    ip link delete cni-podman0
  fi
}

# podman's Docker-compatible API, for testcontainers and docker-compose; no systemd here.
start_service() {
  # A service whose working directory was deleted (a CI clone removed) answers pings but starts
  # no container ('conmon: Failed to get working directory'): it is replaced.
  local running
  running="$(cat "$pidfile" 2>/dev/null || true)"
  if [ -n "$running" ] && [ "$(readlink "/proc/$running/cwd" 2>/dev/null)" != "/" ]; then
    kill "$running" 2>/dev/null || true
    sleep 0.5
  fi
  if curl -fsS --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then return; fi
  log "starting podman system service on $socket"
  mkdir -p "$(dirname "$socket")"
  # From /: the service's containers inherit its working directory (env -C: no subshell that
  # would hold this script's stdout open).
  env -C / setsid nohup podman system service --time=0 "unix://$socket" >/var/log/podman-service.log 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 100); do
    curl -fsS --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  log "podman system service did not answer on $socket: see /var/log/podman-service.log"
  return 1
}

# The nats-server the NATS image runs: NATS_SERVER_BIN, else the newest release (built once).
nats_binary() {
  if [ -n "${NATS_SERVER_BIN:-}" ]; then echo "$NATS_SERVER_BIN"; else "$here/nats.sh" server newest; fi
}
nats_image() { echo "localhost/matrix-nats:$("$(nats_binary)" --version | sed 's/^nats-server: v//')"; }
# The service's image runs on Node 24, as the Dockerfile's default does: the npm package's binary
# (scripts/node.sh) when this machine's node is of another major.
node_dir() { "$here/node.sh" 24; }
node_image() { echo "localhost/matrix-node:$("$(node_dir)/node" --version | sed 's/^v//')-bookworm"; }

# Ryuk's image cannot be had here; the harness stops its container itself. This machine has a
# /.dockerenv, so testcontainers would reach ports through the bridge's gateway: loopback instead.
print_env() {
  cat <<ENV
export DOCKER_HOST=unix://$socket
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
export NATS_IMAGE=$(nats_image)
export NODE_IMAGE=$(node_image)
ENV
}

setup() {
  # netavark and aardvark-dns are only recommended by podman: without them, containers of a
  # compose stack cannot find each other by service name.
  install_missing podman runc netavark aardvark-dns iptables curl busybox-static debootstrap docker-compose
  write_config
  remove_cni_bridge
  start_service
  "$here/images/nats.sh" "$(nats_image)" "$(nats_binary)"
  "$here/images/node.sh" "$(node_image)" "$(node_dir)/node"
  print_env
}

case "${1:-setup}" in
  setup) setup ;;
  env) print_env ;;
  *) echo "usage: $0 [setup|env]" >&2; exit 2 ;;
esac
