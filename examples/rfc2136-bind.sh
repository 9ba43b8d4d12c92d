#!/usr/bin/env bash
# shardsync against a real BIND 9, all on loopback, no cluster: the embedded API server stands in for
# Kubernetes. Starts named (zone example.test, TSIG key, dynamic updates), `shardsync apiserver` and
# `shardsync run --provider=rfc2136`, creates a LoadBalancer Service with the external-dns hostname
# annotation through the API (with kubectl when it is installed, else with curl: the embedded API server
# speaks plain HTTP), and shows the A record and its TXT ownership record with dig. Stops everything it
# started on exit; keeps the logs when something failed and says where.
#
# Needs named and dig (Debian: bind9 bind9-dnsutils), and kubectl or curl.
# Ports: free loopback ports are picked; set BIND_PORT, API_PORT or METRICS_PORT to choose them.
set -euo pipefail

missing=()
command -v named >/dev/null 2>&1 || [ -x /usr/sbin/named ] || missing+=("named (apt-get install bind9)")
command -v dig >/dev/null 2>&1 || missing+=("dig (apt-get install bind9-dnsutils)")
command -v shardsync >/dev/null 2>&1 || missing+=("shardsync (pip install -e .)")
command -v kubectl >/dev/null 2>&1 || command -v curl >/dev/null 2>&1 || missing+=("kubectl or curl (apt-get install curl)")
if [ "${#missing[@]}" -gt 0 ]; then
  printf 'rfc2136-bind.sh: missing: %s\n' "${missing[@]}" >&2
  exit 1
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
BIND_PORT=${BIND_PORT:-$(free_port)}
API_PORT=${API_PORT:-$(free_port)}
METRICS_PORT=${METRICS_PORT:-$(free_port)}
ZONE=example.test
API="http://127.0.0.1:$API_PORT"
work=$(mktemp -d)
pids=()
cleanup() {
  status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" = 0 ]; then
    rm -rf "$work"
  else
    echo "logs kept in $work (named.log, apiserver.log, shardsync.log)" >&2
  fi
}
trap cleanup EXIT

named_bin=$(command -v named || echo /usr/sbin/named)
secret=$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')
echo "$secret" > "$work/tsig-secret"

cat > "$work/named.conf" <<CONF
key "shardsync-key" { algorithm hmac-sha256; secret "$secret"; };
options {
  directory "$work"; pid-file "$work/named.pid"; session-keyfile "$work/session.key";
  listen-on port $BIND_PORT { 127.0.0.1; }; listen-on-v6 { none; };
  recursion no; dnssec-validation no; notify no;
};
controls { };
zone "$ZONE" { type primary; file "$work/$ZONE.db";
  allow-update { key "shardsync-key"; }; allow-transfer { key "shardsync-key"; }; };
CONF
cat > "$work/$ZONE.db" <<ZONEFILE
\$TTL 300
@ IN SOA ns.$ZONE. hostmaster.$ZONE. 1 3600 600 86400 60
@ IN NS ns.$ZONE.
ns IN A 127.0.0.1
ZONEFILE

"$named_bin" -g -c "$work/named.conf" > "$work/named.log" 2>&1 & pids+=($!)
shardsync apiserver --port "$API_PORT" --kubeconfig-out "$work/kubeconfig" > "$work/apiserver.log" 2>&1 & pids+=($!)
ready=
for _ in $(seq 100); do
  if [ -s "$work/kubeconfig" ] && dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "$ZONE" SOA > /dev/null 2>&1; then
    ready=1 && break
  fi
  sleep 0.1
done
[ -n "$ready" ] || { echo "named or the API server did not start" >&2; exit 1; }
export KUBECONFIG="$work/kubeconfig"

shardsync run --source=service --provider=rfc2136 \
  --rfc2136-host=127.0.0.1 --rfc2136-port="$BIND_PORT" --rfc2136-zone="$ZONE" \
  --rfc2136-tsig-keyname=shardsync-key --rfc2136-tsig-secret-file="$work/tsig-secret" \
  --txt-owner-id=demo --events --identity=shardsync-0 --metrics-address="127.0.0.1:$METRICS_PORT" \
  > "$work/shardsync.log" 2>&1 & pids+=($!)

service='{"apiVersion": "v1", "kind": "Service",
  "metadata": {"name": "web", "annotations": {"external-dns.alpha.kubernetes.io/hostname": "web.'$ZONE'"}},
  "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}'
address='{"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}'
if command -v kubectl >/dev/null 2>&1; then
  echo "$service" | kubectl apply --validate=false -f -
  kubectl patch service web --subresource=status --type=merge -p "$address"
else
  services="$API/api/v1/namespaces/default/services"
  curl -sSf -o /dev/null -X POST -H 'Content-Type: application/json' -d "$service" "$services"
  curl -sSf -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' -d "$address" "$services/web/status"
  echo "service/web created (curl)"
fi

answer=
for _ in $(seq 100); do
  answer=$(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "web.$ZONE" A)
  [ "$answer" = 192.0.2.10 ] && break
  sleep 0.2
done
echo "web.$ZONE A:        $(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "web.$ZONE" A)"
echo "a-web.$ZONE TXT:    $(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "a-web.$ZONE" TXT)"
[ "$answer" = 192.0.2.10 ] || { echo "record did not appear; shardsync log:" >&2; tail -20 "$work/shardsync.log" >&2; exit 1; }
