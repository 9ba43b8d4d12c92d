#!/usr/bin/env bash
# shardsync against a real BIND 9, all on loopback, no cluster: the embedded API server stands in for
# Kubernetes. Starts named (zone example.test, TSIG key, dynamic updates), `shardsync apiserver` and
# `shardsync run --provider=rfc2136`, creates a LoadBalancer Service with the external-dns hostname
# annotation with kubectl, and shows the A record and its TXT ownership record with dig. Stops everything
# it started on exit. Needs named, dig and kubectl (Debian: bind9 bind9-dnsutils; kubectl).
set -euo pipefail

BIND_PORT=${BIND_PORT:-5353}
API_PORT=${API_PORT:-6443}
METRICS_PORT=${METRICS_PORT:-7979}
ZONE=example.test
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
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
for _ in $(seq 100); do
  [ -s "$work/kubeconfig" ] && dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "$ZONE" SOA > /dev/null 2>&1 && break
  sleep 0.1
done
export KUBECONFIG="$work/kubeconfig"

shardsync run --source=service --provider=rfc2136 \
  --rfc2136-host=127.0.0.1 --rfc2136-port="$BIND_PORT" --rfc2136-zone="$ZONE" \
  --rfc2136-tsig-keyname=shardsync-key --rfc2136-tsig-secret-file="$work/tsig-secret" \
  --txt-owner-id=demo --events --identity=shardsync-0 --metrics-address="127.0.0.1:$METRICS_PORT" \
  > "$work/shardsync.log" 2>&1 & pids+=($!)

kubectl apply --validate=false -f - <<YAML
apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    external-dns.alpha.kubernetes.io/hostname: web.$ZONE
spec:
  type: LoadBalancer
  ports: [{port: 80}]
YAML
kubectl patch service web --subresource=status --type=merge \
  -p '{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}'

for _ in $(seq 100); do
  answer=$(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "web.$ZONE" A)
  [ "$answer" = 192.0.2.10 ] && break
  sleep 0.2
done
echo "web.$ZONE A:        $(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "web.$ZONE" A)"
echo "a-web.$ZONE TXT:    $(dig +short +tcp -p "$BIND_PORT" @127.0.0.1 "a-web.$ZONE" TXT)"
[ "$answer" = 192.0.2.10 ] || { echo "record did not appear; shardsync log:"; tail -20 "$work/shardsync.log"; exit 1; }
