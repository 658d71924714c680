#!/usr/bin/env bash
# The main job: the local stack, a key broker service and the guest components of one confidential VM,
# wired the way the spec's initdata wires them, then flow B and the lazy-attestation poller.
#   scripts/demo.sh [--keep]     (make demo runs it after the build)
# The guest components use their upstream default sockets and the :8006 port, as inside a CVM.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/dist/bin
KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1
KBS_PORT=${KBS_PORT:-8080}
WORK=$(mktemp -d /tmp/broker-demo.XXXXXX)
PIDS=()

line() { printf '  %-74s %s\n' "$1" "$2"; }
fail() {
  line "$1" "FAILED"
  echo "    logs: $WORK/*.log" >&2
  exit 1
}
cleanup() {
  local code=$?
  if [ "$KEEP" = 0 ] || [ "$code" != 0 ]; then
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
  exit "$code"
}
trap cleanup EXIT

wait_for() { # wait_for <description> <command...>: up to 10 s
  local what=$1
  shift
  for _ in $(seq 1 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  fail "$what"
}

for b in kbs kbs-client attestation-agent confidential-data-hub api-server-rest secret sealed-secret-init; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: run make build" >&2; exit 1; }
done
if (exec 3<>"/dev/tcp/127.0.0.1/$KBS_PORT") 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$KBS_PORT; stop it or set KBS_PORT" >&2
  exit 1
fi
if curl -s -o /dev/null "http://127.0.0.1:8006/info" 2>/dev/null; then
  echo "something already listens on 127.0.0.1:8006 (a demo left running with --keep?); stop it first" >&2
  exit 1
fi

echo "broker demo — work folder $WORK"
echo
echo "1. Certificates"
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 -keyout "$WORK/https.key" -out "$WORK/https.crt" \
  -subj "/CN=localhost/O=broker-demo" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
line "KBS HTTPS: RSA 2048, SAN localhost,127.0.0.1" "ok"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/token.key" 2>/dev/null
openssl req -x509 -new -key "$WORK/token.key" -out "$WORK/token.crt" -days 365 -subj "/CN=kbs-token" 2>/dev/null
line "attestation token signer: ECDSA P-256 + certificate" "ok"
openssl genpkey -algorithm ed25519 -out "$WORK/admin.key" 2>/dev/null
openssl pkey -in "$WORK/admin.key" -pubout -out "$WORK/admin.pub" 2>/dev/null
line "admin API key: Ed25519" "ok"

echo
echo "2. Key broker service (HTTPS, authenticated admin API, signed-token verification)"
cat >"$WORK/kbs-config.toml" <<TOML
[http_server]
sockets = ["127.0.0.1:$KBS_PORT"]
private_key = "$WORK/https.key"
certificate = "$WORK/https.crt"

[attestation_token]
trusted_certs_paths = ["$WORK/token.crt"]

[attestation_service]
type = "coco_as_builtin"

[attestation_service.attestation_token_broker.signer]
key_path = "$WORK/token.key"
cert_path = "$WORK/token.crt"

[attestation_service.rvps_config]
type = "BuiltIn"

[admin]
authorization_mode = "AuthenticatedAuthorization"

[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "$WORK/admin.pub" }]

[admin.authorization.regex_acl]
acls = [{ role = "admin", allowed_endpoints = "^/kbs/v0/.+\$" }]

[storage_backend]
storage_type = "LocalFs"

[storage_backend.backends.local_fs]
dir_path = "$WORK/kbs-storage"

[[plugins]]
name = "resource"
storage_backend_type = "kvstorage"
TOML
"$BIN/kbs" --config-file "$WORK/kbs-config.toml" >"$WORK/kbs.log" 2>&1 &
PIDS+=($!)
wait_for "KBS listening on https://127.0.0.1:$KBS_PORT" curl -sf --cacert "$WORK/https.crt" "https://127.0.0.1:$KBS_PORT/healthz"
line "KBS listening on https://127.0.0.1:$KBS_PORT" "ok"

admin() { "$BIN/kbs-client" --url "https://127.0.0.1:$KBS_PORT" --cert-file "$WORK/https.crt" config --auth-private-key "$WORK/admin.key" "$@" >>"$WORK/admin.log" 2>&1; }

printf 'success' >"$WORK/status"
head -c 32 /dev/urandom >"$WORK/dataset.key"
admin set-resource --path default/attestation-status/status --resource-file "$WORK/status" || fail "store default/attestation-status/status"
line "stored default/attestation-status/status = success" "ok"
admin set-resource --path default/app-secret/dataset-key --resource-file "$WORK/dataset.key" || fail "store default/app-secret/dataset-key"
line "stored default/app-secret/dataset-key (32 random bytes)" "ok"
# Reference values for the sample TEE, and a resource policy that releases only to an affirming EAR.
admin set-sample-reference-value launch_digest abcde &&
  admin set-sample-reference-value svn 1 &&
  admin set-sample-reference-value major_version 1 --as-integer --as-single-value &&
  admin set-sample-reference-value minimum_minor_version 4 --as-integer --as-single-value ||
  fail "register reference values"
line "reference values registered in the RVPS" "ok"
admin set-resource-policy --affirming || fail "resource policy: release to affirming attestations"
line "resource policy: release only to affirming attestations" "ok"

echo
echo "3. Guest components, configured through initdata"
CERT_PEM=$(cat "$WORK/https.crt")
mkdir -p "$WORK/initdata"
cat >"$WORK/initdata/aa.toml" <<TOML
[token_configs]
[token_configs.coco_as]
url = "https://127.0.0.1:$KBS_PORT"

[token_configs.kbs]
url = "https://127.0.0.1:$KBS_PORT"
cert = """
$CERT_PEM
"""
TOML
cat >"$WORK/initdata/cdh.toml" <<TOML
socket = 'unix:///run/confidential-containers/cdh.sock'
credentials = []

[kbc]
name = "cc_kbc"
url = "https://127.0.0.1:$KBS_PORT"
kbs_cert = """
$CERT_PEM
"""
TOML
{
  printf 'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n'
  printf "\"aa.toml\" = '''\n%s\n'''\n\n" "$(cat "$WORK/initdata/aa.toml")"
  printf "\"cdh.toml\" = '''\n%s\n'''\n" "$(cat "$WORK/initdata/cdh.toml")"
} >"$WORK/initdata/initdata.toml"
line "initdata.toml (sha256 $(sha256sum "$WORK/initdata/initdata.toml" | cut -c1-16)...)" "ok"

AA_SOCK=/run/confidential-containers/attestation-agent/attestation-agent.sock
"$BIN/attestation-agent" -c "$WORK/initdata/aa.toml" --initdata-toml "$WORK/initdata/initdata.toml" \
  --attestation_sock "unix://$AA_SOCK" >"$WORK/aa.log" 2>&1 &
PIDS+=($!)
wait_for "attestation agent on $AA_SOCK" test -S "$AA_SOCK"
line "attestation-agent on $AA_SOCK" "ok"
"$BIN/confidential-data-hub" -c "$WORK/initdata/cdh.toml" >"$WORK/cdh.log" 2>&1 &
PIDS+=($!)
wait_for "confidential data hub" test -S /run/confidential-containers/cdh.sock
line "confidential-data-hub on /run/confidential-containers/cdh.sock" "ok"
"$BIN/api-server-rest" --features resource >"$WORK/api-server-rest.log" 2>&1 &
PIDS+=($!)
wait_for "api-server-rest on 127.0.0.1:8006" curl -s -o /dev/null http://127.0.0.1:8006/info
line "api-server-rest on http://127.0.0.1:8006" "ok"

echo
echo "4. Flow B: the init container fetches the key, the main container reads it"
mkdir -p "$WORK/shared-volume"
curl -fsS -o "$WORK/shared-volume/dataset.key" http://127.0.0.1:8006/cdh/resource/default/app-secret/dataset-key ||
  fail "init container: curl .../cdh/resource/default/app-secret/dataset-key"
line "init container: curl -> /shared/dataset.key ($(stat -c %s "$WORK/shared-volume/dataset.key") bytes)" "ok"
export DECRYPTION_KEY_PATH="$WORK/shared-volume/dataset.key"
if cmp -s "$DECRYPTION_KEY_PATH" "$WORK/dataset.key"; then
  line "main container: DECRYPTION_KEY_PATH holds the released key" "ok"
else
  fail "main container: key differs from the stored one"
fi

echo
echo "5. Lazy attestation: the sidecar polls default/attestation-status/status"
poll() { [ "$(curl -s http://127.0.0.1:8006/cdh/resource/default/attestation-status/status)" = "success" ]; }
for i in 1 2 3; do
  if poll; then line "poll $i: success" "ok"; else fail "poll $i"; fi
done

echo
echo "6. Flow C: a sealed secret in a /sealed volume"
mkdir -p "$WORK/keys"
"$BIN/secret" keygen --kid sealed-signing --output-dir "$WORK/keys" >>"$WORK/admin.log" 2>&1 || fail "secret keygen"
line "secret keygen: P-256 signing JWK (sealed-signing)" "ok"
admin set-resource --path default/signing-key/jwk_public --resource-file "$WORK/keys/sealed-signing-public.json" ||
  fail "store the public JWK"
printf 'db-password-%s' "$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$WORK/db-password"
admin set-resource --path default/db/password --resource-file "$WORK/db-password" || fail "store default/db/password"
line "stored kbs:///default/signing-key/jwk_public and default/db/password" "ok"
POINTER=$("$BIN/secret" seal --signing-kid kbs:///default/signing-key/jwk_public \
  --signing-jwk-path "$WORK/keys/sealed-signing-private.json" vault \
  --resource-uri kbs:///default/db/password --provider kbs 2>>"$WORK/admin.log") || fail "secret seal"
line "secret seal: pointer ${POINTER:0:24}..." "ok"
# The kubelet projects the cluster Secret into the CVM as a volume under /sealed.
SEALED="$WORK/sealed/db-credentials"
mkdir -p "$SEALED/..2026_01_01_00_00_00.000000001"
ln -s ..2026_01_01_00_00_00.000000001 "$SEALED/..data"
printf '%s' "$POINTER" >"$SEALED/..data/password"
ln -s ..data/password "$SEALED/password"
"$BIN/sealed-secret-init" --root "$WORK/sealed" >"$WORK/sealed-secret-init.log" 2>&1 || fail "sealed-secret-init"
if cmp -s "$SEALED/password" "$WORK/db-password"; then
  line "sealed-secret-init: /sealed/db-credentials/password holds the secret" "ok"
else
  fail "sealed-secret-init: file still holds $(head -c 12 "$SEALED/password")…"
fi

echo
echo "7. The operator revokes release: deny-all resource policy"
admin set-resource-policy --deny-all || fail "set deny-all resource policy"
line "resource policy: deny all" "ok"
if poll; then
  fail "poll after revocation still answered success"
else
  line "poll: not success, so the sidecar exits non-zero and the loss is noticed" "ok"
fi

echo
if [ "$KEEP" = 1 ]; then
  admin set-resource-policy --affirming
  echo "The stack keeps running (KBS log: $WORK/kbs.log). Try:"
  echo "  curl http://127.0.0.1:8006/cdh/resource/default/attestation-status/status"
  echo "Stop it with: kill ${PIDS[*]}"
  trap - EXIT
else
  echo "8. Stopping the stack"
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  line "all processes stopped" "ok"
fi
