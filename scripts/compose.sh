#!/usr/bin/env bash
# Brings the compose stack up (healthy, the service ready) or takes it down, with Docker or podman.
#
#   scripts/compose.sh up      # docker compose up -d --build; waits for NATS healthy and the service ready
#   scripts/compose.sh down    # docker compose down -v
#
# podman runs healthchecks from systemd timers; without systemd (containers, CI) none run and
# `depends_on: condition: service_healthy` would wait forever, so `up` runs them itself meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly project="${COMPOSE_PROJECT_NAME:-matrix-tool-registry}"
log() { echo "compose: $*" >&2; }

# `docker compose` (v2) where there is one, else docker-compose (v1.29, Debian's).
compose() {
  if docker compose version >/dev/null 2>&1; then docker compose -p "$project" "$@"; else docker-compose -p "$project" "$@"; fi
}

# True when the engine behind DOCKER_HOST is podman and nothing runs its healthcheck timers.
podman_without_timers() {
  command -v podman >/dev/null 2>&1 && [ ! -d /run/systemd/system ] &&
    curl -fsS --unix-socket "${DOCKER_HOST#unix://}" http://d/version 2>/dev/null | grep -q '"Podman Engine"'
}

# Runs the healthcheck of every container still starting, every 2 s (the compose file's interval),
# as long as this script runs ($$ is the script's pid, also in this background subshell).
run_healthchecks() {
  while kill -0 $$ 2>/dev/null; do
    for id in $(podman ps -q --filter health=starting); do podman healthcheck run "$id" >/dev/null 2>&1 || true; done
    sleep 2
  done
}

up() {
  if podman_without_timers; then
    log "podman without systemd: running the healthchecks while the stack starts"
    run_healthchecks &
    # Stopped however `up` ends, a failed build included.
    trap "kill $! 2>/dev/null || true" EXIT
  fi
  compose up -d --build "$@"
  wait_ready
}

# The service logs one line with ` ready ` once every mount answers.
wait_ready() {
  for _ in $(seq 1 60); do
    if compose logs registry 2>&1 | grep -q ' ready '; then
      compose logs registry 2>&1 | grep ' ready ' | tail -1 >&2
      return
    fi
    sleep 1
  done
  compose logs registry >&2
  log "the service did not log ready within 60 s"
  return 1
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) shift; compose down -v "$@" ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
