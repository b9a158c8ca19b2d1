#!/bin/sh
# Decentralized auth (operator mode) for the tool registry, made with nsc: the same accounts,
# users and least-privilege permissions as deploy/nats.conf, signed as JWTs instead of written
# into the server's configuration.
#
#   deploy/operator/make.sh OUT_DIR
#
# NSC names the nsc binary (default `nsc` on PATH; scripts/nats.sh nsc 2.12.0 builds one).
# AGENT_MAX_PAYLOAD (bytes, default 262144) bounds every message an agent user publishes.
# MOUNTS (default `weather`) names the mounts of your own: one user each, as `weather` below.
# OUT_DIR (outside the tree, or deploy/operator/out, which git ignores) receives:
#   server.conf       the operator JWT, the system account and a memory resolver preloaded
#                     with both accounts (start nats-server with -c OUT_DIR/server.conf -js)
#   <user>.creds      one creds file per user: service, operator, agent, agent-2 and each mount
#   nsc/              the nsc store and its keys (the operator's and accounts' seeds: keep it
#                     private, it signs every user)
#
# deploy/nats.conf explains each permission; this script gives each user the same ones.
# Accounts: MATRIX (the service, the operator, one user per mount; JetStream on) and AGENTS (one
# user per agent). MATRIX exports the ops an agent may call to AGENTS only (private exports,
# activated for AGENTS), and AGENTS imports them with `share`, so nats-server appends
# Nats-Request-Info naming the sending account and user: a grant bound with --user holds only
# for that user's requests.
set -eu

OUT=${1:?usage: deploy/operator/make.sh OUT_DIR}
NSC=${NSC:-nsc}
AGENT_MAX_PAYLOAD=${AGENT_MAX_PAYLOAD:-262144}
MOUNTS=${MOUNTS:-weather}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STORE="$OUT/nsc"
if [ -e "$STORE" ]; then
  echo "make.sh: $STORE exists; choose an empty OUT_DIR (it holds an operator's keys)" >&2
  exit 2
fi
export NKEYS_PATH="$STORE/keys"

nsc() { "$NSC" -H "$STORE" "$@"; }

nsc add operator --name matrix --sys >/dev/null
nsc add account --name MATRIX >/dev/null
nsc edit account --name MATRIX --js-mem-storage -1 --js-disk-storage -1 \
  --js-streams -1 --js-consumer -1 >/dev/null
nsc add account --name AGENTS >/dev/null
AGENTS_KEY=$(nsc describe account AGENTS --field sub | tr -d '"')

# MATRIX: the service (unrestricted: it reaches every target a tool names), the operator, and a
# user per mount (app.<mount>: its own mount's requests, replies onto the two inbox prefixes only).
nsc add user --account MATRIX --name service >/dev/null
nsc add user --account MATRIX --name operator \
  --allow-pub 'system.>,$SRV.>' --deny-pub 'system.*.events.>,system.dispatcher.audit.>' \
  --allow-sub '_INBOX_operator.>,system.*.events.>' >/dev/null
for mount in $MOUNTS; do
  nsc add user --account MATRIX --name "$mount" \
    --allow-pub '_INBOX_targets.>,_INBOX_operator.>' \
    --allow-sub "app.$mount.*,\$SRV.*.app-$mount,\$SRV.*.app-$mount.*" --deny-sub "app.$mount.*.>" >/dev/null
done

# What agents reach, and nothing else: each op exported to AGENTS only, imported with share.
AGENT_OPS='system.dispatcher.$call system.dispatcher.$cancel system.tools.$resolve system.tools.$search system.tools.$list
system.tools.$introspect system.tasks.$get system.tasks.$result system.tasks.$cancel system.tasks.$list'
for op in $AGENT_OPS; do
  case $op in
    'system.dispatcher.$call') response='--response-type Stream --response-threshold 2m' ;;
    'system.dispatcher.$cancel') response='--response-threshold 5s' ;;
    *) response='' ;;
  esac
  # shellcheck disable=SC2086 # $response is two flags or none
  nsc add export --account MATRIX --service --private --subject "$op" $response >/dev/null
  nsc generate activation --account MATRIX --subject "$op" --target-account "$AGENTS_KEY" \
    --output-file "$STORE/activation.jwt" >/dev/null 2>&1
  nsc add import --account AGENTS --service --share --token "$STORE/activation.jwt" >/dev/null
done
nsc add export --account MATRIX --private --subject 'system.tools.events.changed' >/dev/null
nsc generate activation --account MATRIX --subject 'system.tools.events.changed' \
  --target-account "$AGENTS_KEY" --output-file "$STORE/activation.jwt" >/dev/null 2>&1
nsc add import --account AGENTS --token "$STORE/activation.jwt" >/dev/null
rm -f "$STORE/activation.jwt"

# AGENTS: one user per agent, its replies on its own inbox prefix only, and no message larger
# than AGENT_MAX_PAYLOAD: nats-server refuses a larger one before the service reads a byte.
AGENT_PUB=$(echo "$AGENT_OPS" | tr -s ' \n' ',' | sed 's/,$//')
for agent in agent agent-2; do
  nsc add user --account AGENTS --name "$agent" --allow-pub "$AGENT_PUB" \
    --allow-sub "_INBOX_$agent.>,system.tools.events.changed" >/dev/null
  nsc edit user --account AGENTS --name "$agent" --payload "$AGENT_MAX_PAYLOAD" >/dev/null
done

nsc generate config --mem-resolver --sys-account SYS --config-file "$OUT/server.conf" --force >/dev/null 2>&1
for user in service operator $MOUNTS; do
  nsc generate creds --account MATRIX --name "$user" --output-file "$OUT/$user.creds" >/dev/null 2>&1
done
for user in agent agent-2; do
  nsc generate creds --account AGENTS --name "$user" --output-file "$OUT/$user.creds" >/dev/null 2>&1
done
chmod 600 "$OUT"/*.creds
echo "$OUT/server.conf"
