#!/usr/bin/env bash
# The main job: the local stack, a key broker service and the guest components of one confidential VM,
# wired the way the spec's initdata wires them, then flow A (image policy check on a local registry), flow B,
# the lazy-attestation poller and flow C.
#   scripts/demo.sh [--keep] [--tee sample|az-snp-vtpm] [--topology one|services|containers]
#   (make demo runs it after the build)
# The work folder (keys, configuration, logs) is removed at the end; --keep leaves the stack running and
# the folder in place, and prints its path. After a failure only its logs are kept.
# Environment: KBS_PORT (default 8080), REGISTRY_PORT (default: a free port), DEMO_TEE (as --tee),
# DEMO_TOPOLOGY (as --topology).
# Exit status: 0 every step passed, 1 a step failed, 2 usage error.
# The guest components use their upstream default sockets and the :8006 port, as inside a CVM.
# TEE (--tee, or DEMO_TEE):
#   sample       (default) trustee's software TEE: runs anywhere, no hardware root;
#   az-snp-vtpm  the mock TEE device (swtpm behind an Azure-style paravisor, a test AMD root, IMDS on
#                loopback): the agent attests through the vTPM, the KBS trusts the device's test ARK, and
#                broker's five-PCR policy (as brokerctl render deploys it) compares PCR 03, 08, 09, 11 and 12 with reference values
#                made by the reference-values tool. Needs swtpm (scripts/install-deps.sh).
# Topology (--topology, or DEMO_TOPOLOGY):
#   one       (default) the KBS with its built-in attestation service and RVPS, one process;
#   services  trustee's docker-compose shape: the KBS (coco_as_grpc), the attestation service (gRPC) and
#             the RVPS as three processes on loopback, the AS reaching the RVPS over gRPC (GrpcRemote).
#             Their writes need the admin key (--admin-public-key): the KBS signs an admin JWT for each
#             write it passes to the AS ([attestation_service] admin_private_key), and the AS one for each
#             registration it forwards to the RVPS (--rvps-auth-private-key), so the admin API works as
#             in the one-process topology.
#   containers  the same three services from the container images (make images: dist/images/kbs,
#             attestation-service and rvps), each run by runc as the images' non-root user with a
#             read-only root, on the host's network (the attestation service as `attestation-service`, which
#             serves trustee's grpc-as and restful-as on one process).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/dist/bin
KEEP=0
TEE=${DEMO_TEE:-sample}
TOPOLOGY=${DEMO_TOPOLOGY:-one}
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --keep) KEEP=1 ;;
    --tee)
      [ $# -ge 2 ] || { echo "--tee needs a value: sample or az-snp-vtpm" >&2; exit 2; }
      TEE=$2
      shift
      ;;
    --tee=*) TEE=${1#--tee=} ;;
    --topology)
      [ $# -ge 2 ] || { echo "--topology needs a value: one, services or containers" >&2; exit 2; }
      TOPOLOGY=$2
      shift
      ;;
    --topology=*) TOPOLOGY=${1#--topology=} ;;
    *)
      echo "unknown argument $1; run scripts/demo.sh --help" >&2
      exit 2
      ;;
  esac
  shift
done
case "$TEE" in
  sample | az-snp-vtpm) ;;
  *) echo "unknown TEE '$TEE': the demo runs sample or az-snp-vtpm" >&2; exit 2 ;;
esac
case "$TOPOLOGY" in
  one | services | containers) ;;
  *) echo "unknown topology '$TOPOLOGY': one, services or containers" >&2; exit 2 ;;
esac
# services and containers: the KBS, the attestation service and the RVPS as three services.
SPLIT=0
[ "$TOPOLOGY" = one ] || SPLIT=1
KBS_PORT=${KBS_PORT:-8080}
WORK=$(mktemp -d /tmp/broker-demo.XXXXXX)
NODE=$ROOT/node_modules/.bin/node
PIDS=()

line() { printf '  %-74s %s\n' "$1" "$2"; }
fail() {
  line "$1" "FAILED"
  echo "    logs: $WORK/*.log" >&2
  exit 1
}
cleanup() {
  local code=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then
    echo "work folder kept (it holds the demo's private keys): $WORK" >&2
  elif [ "$code" = 0 ]; then
    rm -rf "$WORK"
  else
    # The keys and the rest go; the logs stay for the failure.
    find "$WORK" -mindepth 1 -maxdepth 1 ! -name '*.log' -exec rm -rf {} +
    echo "work folder with the logs only (keys removed): $WORK" >&2
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

for b in kbs kbs-client attestation-service rvps rvps-tool attestation-agent confidential-data-hub api-server-rest secret sealed-secret-init image-policy; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: run make build" >&2; exit 1; }
done
command -v docker-registry >/dev/null || { echo "docker-registry is missing: run scripts/install-deps.sh" >&2; exit 1; }
if [ "$TEE" = az-snp-vtpm ]; then
  [ -x "$BIN/mock-tee" ] || { echo "missing $BIN/mock-tee: run make build" >&2; exit 1; }
  command -v swtpm >/dev/null || { echo "swtpm is missing (the mock TEE device needs it): run scripts/install-deps.sh" >&2; exit 1; }
  # The reference-values tool: the executable when the build has it, else the same command bundled here.
  if [ -x "$BIN/reference-values" ]; then
    reference_values() { "$BIN/reference-values" "$@"; }
  else
    echo "import { referenceValuesMain } from '@broker/reference-values'; referenceValuesMain(process.argv.slice(2)).then((c) => process.exit(c));" |
      "$ROOT/node_modules/.bin/esbuild" --bundle --platform=node --target=node24 --format=cjs --loader=ts \
        --sourcefile=reference-values.ts --outfile="$WORK/reference-values.cjs" --log-level=warning ||
      { echo "could not bundle the reference-values tool" >&2; exit 1; }
    reference_values() { "$NODE" "$WORK/reference-values.cjs" "$@"; }
  fi
fi
# Flow A's small client: builds and pushes images with @broker/image, and calls PullImage on the CDH's
# ttrpc socket the way kata's agent does inside the CVM.
# import.meta.url as the executables' build defines it: a CommonJS bundle has none, and openpgp's
# ESM build calls createRequire(import.meta.url).
"$ROOT/node_modules/.bin/esbuild" test/helpers/image-tool.ts --bundle --platform=node --target=node24 --format=cjs \
  --define:import.meta.url=__image_tool_url --banner:js='const __image_tool_url = require("url").pathToFileURL(__filename).href;' \
  --outfile="$WORK/image-tool.cjs" --log-level=warning || { echo "could not bundle test/helpers/image-tool.ts" >&2; exit 1; }
image_tool() { "$NODE" "$WORK/image-tool.cjs" "$@"; }
if (exec 3<>"/dev/tcp/127.0.0.1/$KBS_PORT") 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$KBS_PORT; stop it or set KBS_PORT" >&2
  exit 1
fi
if curl -s -o /dev/null "http://127.0.0.1:8006/info" 2>/dev/null; then
  echo "something already listens on 127.0.0.1:8006 (a demo left running with --keep?); stop it first" >&2
  exit 1
fi

echo "broker demo — work folder $WORK"
if [ "$TEE" = az-snp-vtpm ]; then
  echo "TEE: az-snp-vtpm on the mock TEE device (vTPM quote + HCL report, SNP report signed by a test VCEK)"
else
  echo "TEE: sample (trustee's software TEE, no hardware root; scripts/demo.sh --tee az-snp-vtpm for the vTPM path)"
fi
echo
echo "1. Certificates"
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 -keyout "$WORK/https.key" -out "$WORK/https.crt" \
  -subj "/CN=localhost/O=broker-demo" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
line "KBS HTTPS: RSA 2048, SAN localhost,127.0.0.1" "ok"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/token.key" 2>/dev/null
openssl req -x509 -new -key "$WORK/token.key" -out "$WORK/token.crt" -days 365 -subj "/CN=kbs-token" 2>/dev/null
line "attestation token signer: ECDSA P-256 + certificate" "ok"
"$BIN/kbs-client" keygen -f "$WORK/admin.key" >/dev/null || fail "kbs-client keygen"
line "admin API key: Ed25519 (kbs-client keygen: admin.key, admin.pub)" "ok"
# An admin JWT for the operator console and the attestation service's POST /policy: EdDSA over the admin
# key, `role` = admin, 2 h, signed by kbs-client; the KBS checks it as it checks kbs-client's own tokens.
console_token() { "$BIN/kbs-client" admin-token --auth-private-key "$WORK/admin.key" --auth-role admin --expiry 2h; }

if [ "$TEE" = az-snp-vtpm ]; then
  echo
  echo "1b. Mock TEE device: swtpm as an Azure SEV-SNP vTPM, booting the sample pod-VM image"
  MANIFEST=$ROOT/packages/mock-tee/manifests/podvm-sample.json
  "$BIN/mock-tee" start --state "$WORK/mock-tee" --manifest "$MANIFEST" >"$WORK/mock-tee.env" 2>"$WORK/mock-tee.log" &
  PIDS+=($!)
  wait_for "mock TEE device" grep -q '^MOCK_TEE_IMAGE_TAG=' "$WORK/mock-tee.env"
  # KEY=VALUE lines, shell-quoted by mock-tee: the guest's TPM and IMDS addresses, the device's root.
  # shellcheck disable=SC1091
  . "$WORK/mock-tee.env"
  line "vTPM at $BROKER_TPM, IMDS at $BROKER_AZURE_IMDS_URL" "ok"
  line "PCR 03, 09, 11, 12 extended from $(basename "$MANIFEST") ($MOCK_TEE_IMAGE_TAG)" "ok"
  line "test AMD root (ARK + ASK): $MOCK_TEE_ROOTS" "ok"
  mkdir -p "$WORK/reference-values"
fi

echo
echo "2. Key broker service (HTTPS, authenticated admin API, signed-token verification)"
# The attestation service: built in (one process), or its own process with the RVPS in a third one.
AS_TABLE="[attestation_service]
type = \"coco_as_builtin\"

[attestation_service.attestation_token_broker.signer]
key_path = \"$WORK/token.key\"
cert_path = \"$WORK/token.crt\"

[attestation_service.rvps_config]
type = \"BuiltIn\""
IMAGE_UID=65532
# run_service <name> <image> <command> <args...>: the command from dist/bin, or (containers) the image's
# command of that name in a runc container: host network, read-only root, the images' user, and the work
# folder bound at its own path so that the configuration reads the same either way. Output: $WORK/<name>.log.
run_service() {
  local name=$1 image=$2 command=$3
  shift 3
  if [ "$TOPOLOGY" != containers ]; then
    "$BIN/$command" "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    return
  fi
  local dir=$WORK/containers/$name
  mkdir -p "$dir"
  skopeo copy --quiet "oci:$ROOT/dist/images/$image:$IMAGE_TAG" "oci:$dir/image:$image" &&
    umoci unpack --image "$dir/image:$image" "$dir/bundle" >/dev/null ||
    fail "unpack dist/images/$image (run make images)"
  "$NODE" -e '
    const fs = require("fs");
    const [file, work, ...args] = process.argv.slice(1);
    const c = JSON.parse(fs.readFileSync(file, "utf8"));
    c.process.terminal = false;
    c.process.args = args;
    c.process.noNewPrivileges = true;
    c.root.readonly = true;
    c.linux.namespaces = c.linux.namespaces.filter((n) => n.type !== "network");
    c.mounts.push({ destination: work, type: "bind", source: work, options: ["rbind", "rw"] });
    fs.writeFileSync(file, JSON.stringify(c));' "$dir/bundle/config.json" "$WORK" "/usr/local/bin/$command" "$@"
  runc --root "$WORK/runc" run --bundle "$dir/bundle" "broker-demo-$$-$name" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
if [ "$TOPOLOGY" = containers ]; then
  command -v runc >/dev/null || { echo "runc is missing: run scripts/install-deps.sh" >&2; exit 1; }
  IMAGE_TAG=$(sed -n 's/.*"org.opencontainers.image.ref.name":"\([^"]*\)".*/\1/p' "$ROOT/dist/images/kbs/index.json" 2>/dev/null)
  [ -n "$IMAGE_TAG" ] || { echo "dist/images is missing: run make images" >&2; exit 1; }
  # The services run as the images' user: they read the work folder's configuration and keys, and
  # write their stores in it.
  mkdir -p "$WORK/reference_values" "$WORK/as-storage" "$WORK/kbs-storage"
  chmod 755 "$WORK"
  chown "$IMAGE_UID:$IMAGE_UID" "$WORK/token.key" "$WORK/https.key" "$WORK/admin.key" "$WORK/reference_values" "$WORK/as-storage" "$WORK/kbs-storage"
  line "container images dist/images/{kbs,attestation-service,rvps}:$IMAGE_TAG, run by runc as uid $IMAGE_UID" "ok"
fi
if [ "$SPLIT" = 1 ]; then
  free_port() { "$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
  listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
  RVPS_PORT=$(free_port)
  printf '{"storage":{"type":"LocalFs","file_path":"%s"}}\n' "$WORK/reference_values" >"$WORK/rvps.json"
  run_service rvps rvps rvps --config "$WORK/rvps.json" --address "127.0.0.1:$RVPS_PORT" --admin-public-key "$WORK/admin.pub"
  wait_for "RVPS (gRPC) on 127.0.0.1:$RVPS_PORT" listening "$RVPS_PORT"
  line "RVPS (gRPC) on 127.0.0.1:$RVPS_PORT, writes need an admin JWT" "ok"
  # Writes without the admin key are refused; with it they pass.
  rvps_register() { "$BIN/rvps-tool" register --addr "http://127.0.0.1:$RVPS_PORT" "$@" >>"$WORK/admin.log" 2>&1; }
  printf '{"version":"0.1.0","type":"sample","payload":"%s"}\n' "$(printf '{"demo_probe":["1"]}' | openssl base64 -A)" \
    >"$WORK/probe-message.json"
  if rvps_register --path "$WORK/probe-message.json"; then fail "RVPS refuses a registration without the admin key"; fi
  grep -q 'needs authentication' "$WORK/admin.log" || fail "RVPS refuses a registration without the admin key"
  line "RVPS refuses a registration without the admin key (UNAUTHENTICATED)" "ok"
  AS_PORT=$(free_port)
  AS_REST_PORT=$(free_port)
  AS_VERIFIERS=""
  if [ "$TEE" = az-snp-vtpm ]; then
    AS_VERIFIERS=",\"verifier_config\":{\"snp_verifier\":{\"trusted_ark_paths\":[\"$MOCK_TEE_ROOTS\"]}}"
  fi
  cat >"$WORK/as-config.json" <<JSON
{"storage_backend":{"storage_type":"LocalFs","backends":{"local_fs":{"dir_path":"$WORK/as-storage"}}},
"rvps_config":{"type":"GrpcRemote","address":"http://127.0.0.1:$RVPS_PORT"},
"attestation_token_broker":{"duration_min":5,"signer":{"key_path":"$WORK/token.key","cert_path":"$WORK/token.crt"}}$AS_VERIFIERS}
JSON
  run_service as attestation-service attestation-service --config-file "$WORK/as-config.json" --socket "127.0.0.1:$AS_PORT" \
    --rest "127.0.0.1:$AS_REST_PORT" --admin-public-key "$WORK/admin.pub" --rvps-auth-private-key "$WORK/admin.key"
  wait_for "attestation service (gRPC) on 127.0.0.1:$AS_PORT" listening "$AS_PORT"
  wait_for "attestation service (REST) on 127.0.0.1:$AS_REST_PORT" listening "$AS_REST_PORT"
  line "attestation service: gRPC :$AS_PORT, REST :$AS_REST_PORT, writes need an admin JWT" "ok"
  # The KBS's credential for the AS's writes: an admin JWT signed with the same key for each one.
  AS_TABLE="[attestation_service]
type = \"coco_as_grpc\"
as_addr = \"http://127.0.0.1:$AS_PORT\"
pool_size = 20
timeout = 5
admin_private_key = \"$WORK/admin.key\""
fi
cat >"$WORK/kbs-config.toml" <<TOML
[http_server]
sockets = ["127.0.0.1:$KBS_PORT"]
private_key = "$WORK/https.key"
certificate = "$WORK/https.crt"

[attestation_token]
trusted_certs_paths = ["$WORK/token.crt"]

$AS_TABLE

[admin]
authorization_mode = "AuthenticatedAuthorization"
console = true

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
if [ "$TEE" = az-snp-vtpm ]; then
  # Trust the device's test root (never in production), and take reference values from a directory, as a
  # deployment mounts the reference-values ConfigMap. The attestation policy is the one brokerctl render
  # deploys: broker's five-PCR policy as default_cpu (the KBS's own default_cpu is trustee's).
  mkdir -p "$WORK/attestation-policies"
  "$BIN/brokerctl" attestation-policy >"$WORK/attestation-policies/default_cpu.rego" ||
    fail "brokerctl attestation-policy"
  if [ "$TOPOLOGY" = one ]; then
    printf '\n[attestation_service.verifier_config.snp_verifier]\ntrusted_ark_paths = ["%s"]\n' "$MOCK_TEE_ROOTS" >>"$WORK/kbs-config.toml"
    cat >>"$WORK/kbs-config.toml" <<TOML

[mounted_files]
attestation_policies = ["$WORK/attestation-policies"]
reference_values = ["$WORK/reference-values"]
TOML
  else
    # The AS refuses a policy from anyone without the admin key; the KBS's admin API sets it below.
    printf '{"policy_id":"default_cpu","policy":"%s"}' \
      "$(openssl base64 -A <"$WORK/attestation-policies/default_cpu.rego" | tr '+/' '-_' | tr -d '=')" >"$WORK/policy.json"
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' --data-binary @"$WORK/policy.json" \
      "http://127.0.0.1:$AS_REST_PORT/policy")" = 401 ] || fail "attestation service refuses POST /policy without an admin JWT"
    line "AS: POST /policy without the admin key is 401" "ok"
  fi
fi
run_service kbs kbs kbs --config-file "$WORK/kbs-config.toml"
wait_for "KBS listening on https://127.0.0.1:$KBS_PORT" curl -sf --cacert "$WORK/https.crt" "https://127.0.0.1:$KBS_PORT/healthz"
if [ "$SPLIT" = 1 ]; then
  line "KBS listening on https://127.0.0.1:$KBS_PORT (coco_as_grpc -> 127.0.0.1:$AS_PORT)" "ok"
else
  line "KBS listening on https://127.0.0.1:$KBS_PORT" "ok"
fi

admin() { "$BIN/kbs-client" --url "https://127.0.0.1:$KBS_PORT" --cert-file "$WORK/https.crt" config --auth-private-key "$WORK/admin.key" "$@" >>"$WORK/admin.log" 2>&1; }

printf 'success' >"$WORK/status"
head -c 32 /dev/urandom >"$WORK/dataset.key"
admin set-resource --path default/attestation-status/status --resource-file "$WORK/status" || fail "store default/attestation-status/status"
line "stored default/attestation-status/status = success" "ok"
admin set-resource --path default/app-secret/dataset-key --resource-file "$WORK/dataset.key" || fail "store default/app-secret/dataset-key"
line "stored default/app-secret/dataset-key (32 random bytes)" "ok"
# Reference values for the sample TEE (the vTPM's come from the reference-values tool once the initdata
# exists, step 4), and a resource policy that releases only to an affirming EAR.
if [ "$TEE" = sample ]; then
  admin set-sample-reference-value launch_digest abcde &&
    admin set-sample-reference-value svn 1 &&
    admin set-sample-reference-value major_version 1 --as-integer --as-single-value &&
    admin set-sample-reference-value minimum_minor_version 4 --as-integer --as-single-value ||
    fail "register reference values"
  if [ "$SPLIT" = 1 ]; then
    line "reference values registered via KBS -> AS -> RVPS (admin JWTs)" "ok"
  else
    line "reference values registered in the RVPS" "ok"
  fi
elif [ "$SPLIT" = 1 ]; then
  admin set-attestation-policy --id default_cpu --policy-file "$WORK/attestation-policies/default_cpu.rego" ||
    fail "attestation policy default_cpu set through the KBS"
  line "attestation policy default_cpu set through the KBS (admin JWT)" "ok"
fi
admin set-resource-policy --affirming || fail "resource policy: release to affirming attestations"
line "resource policy: release only to affirming attestations" "ok"
CONSOLE_TOKEN=$(console_token) || fail "console admin token"
curl -sf --cacert "$WORK/https.crt" -H 'content-type: application/json' \
  -d "{\"token\":\"$CONSOLE_TOKEN\"}" "https://127.0.0.1:$KBS_PORT/kbs/v0/admin/console/session" >/dev/null ||
  fail "operator console sign-in"
line "operator console at /console/: an admin JWT signs in" "ok"

echo
echo "3. Flow A setup: a registry with a signed and an unsigned image, the image policy in the KBS"
REGISTRY_PORT=${REGISTRY_PORT:-$("$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}
REG=127.0.0.1:$REGISTRY_PORT
mkdir -p "$WORK/registry"
cat >"$WORK/registry/config.yml" <<YAML
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $WORK/registry/data
http:
  addr: $REG
YAML
docker-registry serve "$WORK/registry/config.yml" >"$WORK/registry.log" 2>&1 &
PIDS+=($!)
wait_for "docker-registry on http://$REG" curl -sf "http://$REG/v2/"
line "docker-registry $(docker-registry --version 2>/dev/null | awk '{print $3}' | sed 's/+.*//') on http://$REG" "ok"
# The same image in two repositories: cosign-style signatures live next to the image, so only one is signed.
SIGNED_IMAGE=$REG/signed/hello:v1
UNSIGNED_IMAGE=$REG/signed/hello-unsigned:v1
for ref in "$SIGNED_IMAGE" "$UNSIGNED_IMAGE"; do
  digest=$(image_tool push "$ref" "app/hello.txt=hello from a workshop image" 2>>"$WORK/admin.log") ||
    fail "build and push $ref"
  line "built and pushed $ref (${digest:0:15}...)" "ok"
done
mkdir -p "$WORK/image-keys"
"$BIN/image-policy" generate-key "$WORK/image-keys/workshop" >>"$WORK/admin.log" 2>&1 &&
  "$BIN/image-policy" generate-key "$WORK/image-keys/vendor" >>"$WORK/admin.log" 2>&1 ||
  fail "image-policy generate-key"
line "image-policy generate-key: workshop and vendor keys (ECDSA P-256)" "ok"
"$BIN/image-policy" sign --key "$WORK/image-keys/workshop.key" --plain-http "docker://$SIGNED_IMAGE" >>"$WORK/admin.log" 2>&1 ||
  fail "image-policy sign $SIGNED_IMAGE"
line "image-policy sign: $SIGNED_IMAGE" "ok"
# The spec's policy: default reject, the workshop's signed prefix, two vendor hosts with their own key.
cat >"$WORK/image-policy.json" <<JSON
{
  "default": [{ "type": "reject" }],
  "transports": {
    "docker": {
      "$REG/signed": [{ "type": "sigstoreSigned", "keyPath": "kbs:///default/signature-secret/pub-key" }],
      "registry.vendor-a.example": [{ "type": "sigstoreSigned", "keyPath": "kbs:///default/vendor-signature-secret/pub-key" }],
      "registry.vendor-b.example": [{ "type": "sigstoreSigned", "keyPath": "kbs:///default/vendor-signature-secret/pub-key" }]
    }
  }
}
JSON
admin set-resource --path default/image-policy/policy --resource-file "$WORK/image-policy.json" ||
  fail "store default/image-policy/policy"
line "stored default/image-policy/policy (default reject; signed prefix, 2 vendors)" "ok"
admin set-resource --path default/signature-secret/pub-key --resource-file "$WORK/image-keys/workshop.pub" &&
  admin set-resource --path default/vendor-signature-secret/pub-key --resource-file "$WORK/image-keys/vendor.pub" ||
  fail "store the image signature public keys"
line "stored the public keys: default/{,vendor-}signature-secret/pub-key" "ok"

echo
echo "4. Guest components, configured through initdata"
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

[image]
image_security_policy_uri = "kbs:///default/image-policy/policy"
work_dir = "$WORK/image-work"

# The workshop registry on loopback speaks plain http.
[[image.registry_config.registry]]
location = "$REG"
insecure = true
TOML
{
  printf 'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n'
  printf "\"aa.toml\" = '''\n%s\n'''\n\n" "$(cat "$WORK/initdata/aa.toml")"
  printf "\"cdh.toml\" = '''\n%s\n'''\n" "$(cat "$WORK/initdata/cdh.toml")"
} >"$WORK/initdata/initdata.toml"
line "initdata.toml (sha256 $(sha256sum "$WORK/initdata/initdata.toml" | cut -c1-16)...)" "ok"

AA_ENV=()
if [ "$TEE" = az-snp-vtpm ]; then
  # What the pod VM image's measurements and this initdata give: the reference values the KBS compares.
  reference_values --platform azure --tee az-snp-vtpm --initdata "$WORK/initdata/initdata.toml" \
    --measurements "$MANIFEST" --image-tag "$MOCK_TEE_IMAGE_TAG" --format rvps-message \
    >"$WORK/rvps-message.json" 2>>"$WORK/admin.log" || fail "reference-values"
  line "reference-values: $(basename "$MANIFEST") + initdata -> snp_pcr03/08/09/11/12" "ok"
  mv "$WORK/rvps-message.json" "$WORK/reference-values/rvps-message.json"
  if [ "$SPLIT" = 1 ]; then
    curl -sf -o /dev/null --cacert "$WORK/https.crt" -H "authorization: Bearer $(console_token)" \
      --data-binary @"$WORK/reference-values/rvps-message.json" "https://127.0.0.1:$KBS_PORT/kbs/v0/reference-value" ||
      fail "register the reference values through the KBS"
  fi
  PCR8=$("$NODE" -e 'const m=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(JSON.parse(Buffer.from(m.payload,"base64")).snp_pcr08[0])' \
    "$WORK/reference-values/rvps-message.json")
  rv_applied() { "$BIN/kbs-client" --url "https://127.0.0.1:$KBS_PORT" --cert-file "$WORK/https.crt" config \
    --auth-private-key "$WORK/admin.key" get-reference-value --id snp_pcr08 2>/dev/null | grep -q "$PCR8"; }
  wait_for "KBS registers the reference values" rv_applied
  if [ "$SPLIT" = 1 ]; then
    line "registered via KBS -> AS -> RVPS, read back (snp_pcr08 ${PCR8:0:16}...)" "ok"
  else
    line "KBS registered them from its reference-values directory (snp_pcr08 ${PCR8:0:16}...)" "ok"
  fi
  AA_ENV=(env "BROKER_TPM=$BROKER_TPM" "BROKER_AZURE_IMDS_URL=$BROKER_AZURE_IMDS_URL")
fi

AA_SOCK=/run/confidential-containers/attestation-agent/attestation-agent.sock
"${AA_ENV[@]}" "$BIN/attestation-agent" -c "$WORK/initdata/aa.toml" --initdata-toml "$WORK/initdata/initdata.toml" \
  --attestation_sock "unix://$AA_SOCK" >"$WORK/aa.log" 2>&1 &
PIDS+=($!)
wait_for "attestation agent on $AA_SOCK" test -S "$AA_SOCK"
line "attestation-agent on $AA_SOCK" "ok"
if [ "$TEE" = az-snp-vtpm ]; then
  wait_for "attestation agent detects az-snp-vtpm" grep -q 'TEE detected: az-snp-vtpm' "$WORK/aa.log"
  line "attestation-agent detected az-snp-vtpm; initdata digest extended into PCR 8" "ok"
else
  wait_for "attestation agent falls back to the sample TEE" grep -q 'using the sample attester' "$WORK/aa.log"
  line "attestation-agent uses the sample TEE (no TEE device here)" "ok"
fi
"$BIN/confidential-data-hub" -c "$WORK/initdata/cdh.toml" >"$WORK/cdh.log" 2>&1 &
PIDS+=($!)
wait_for "confidential data hub" test -S /run/confidential-containers/cdh.sock
line "confidential-data-hub on /run/confidential-containers/cdh.sock" "ok"
"$BIN/api-server-rest" --features resource >"$WORK/api-server-rest.log" 2>&1 &
PIDS+=($!)
wait_for "api-server-rest on 127.0.0.1:8006" curl -s -o /dev/null http://127.0.0.1:8006/info
line "api-server-rest on http://127.0.0.1:8006" "ok"

echo
echo "5. Flow A: the agent asks the CDH to pull each pod's image (PullImage over ttrpc)"
kbs_log_settled() { # every KBS request answered so far is in kbs.log once this marker (the user agent) is
  local marker="sync-$RANDOM$RANDOM"
  curl -sf -o /dev/null -A "$marker" --cacert "$WORK/https.crt" "https://127.0.0.1:$KBS_PORT/healthz" || return 1
  wait_for "KBS access log" grep -q "\"ua\":\"$marker\"" "$WORK/kbs.log"
}
resource_gets() { grep -o '"method":"GET","path":"/kbs/v0/resource/[^"?]*' "$WORK/kbs.log" | sed 's|.*/kbs/v0/resource/||' || true; }
kbs_log_settled || fail "KBS access log"
before=$(resource_gets | wc -l)
if image_tool pull "$UNSIGNED_IMAGE" "$WORK/bundles/unsigned-pod" >"$WORK/pull-unsigned.out" 2>"$WORK/pull-unsigned.err"; then
  fail "PullImage $UNSIGNED_IMAGE: pulled, but the policy requires a signature"
fi
DENIAL='Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule'
grep -qF "error: $DENIAL" "$WORK/pull-unsigned.err" || fail "PullImage $UNSIGNED_IMAGE: unexpected error"
line "PullImage $UNSIGNED_IMAGE: rejected" "ok"
echo "    $(cat "$WORK/pull-unsigned.err")"
kbs_log_settled || fail "KBS access log"
fetched=$(resource_gets | tail -n +$((before + 1)) | tr '\n' ' ')
[ "$fetched" = "default/image-policy/policy " ] || fail "KBS log: the rejected pull fetched: $fetched"
[ ! -e "$WORK/bundles/unsigned-pod/rootfs" ] || fail "the rejected image left a rootfs"
line "KBS log: that pull fetched the policy only (no key, no secret); no rootfs" "ok"
digest=$(image_tool pull "$SIGNED_IMAGE" "$WORK/bundles/signed-pod" 2>"$WORK/pull-signed.err") ||
  fail "PullImage $SIGNED_IMAGE: $(cat "$WORK/pull-signed.err")"
line "PullImage $SIGNED_IMAGE: pulled ${digest:0:15}..." "ok"
[ "$(cat "$WORK/bundles/signed-pod/rootfs/app/hello.txt")" = "hello from a workshop image" ] ||
  fail "the pulled rootfs lacks app/hello.txt"
line "bundle rootfs/app/hello.txt: \"$(cat "$WORK/bundles/signed-pod/rootfs/app/hello.txt")\"" "ok"

echo
"$ROOT/scripts/demo-encrypted-image.sh" "$WORK" "https://127.0.0.1:$KBS_PORT" "$REG" || exit 1

echo
echo "6. Flow B: the init container fetches the key, the main container reads it"
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
kbs_log_settled || fail "KBS access log"
# The appraisal is logged where the attestation service runs: the KBS, or its own process.
APPRAISAL_LOG=$WORK/kbs.log
[ "$SPLIT" = 1 ] && APPRAISAL_LOG=$WORK/as.log && AS_WHO="attestation service"
appraisal=$(grep '"msg":"attestation appraised' "$APPRAISAL_LOG" | tail -1)
tee_used=$(printf '%s' "$appraisal" | grep -o '"tee":"[^"]*"' | cut -d'"' -f4)
status=$(printf '%s' "$appraisal" | grep -o '"status":"[^"]*"' | cut -d'"' -f4)
[ "$tee_used" = "$TEE" ] && [ "$status" = affirming ] || fail "KBS appraisal: tee=$tee_used status=$status"
if [ "$TEE" = az-snp-vtpm ]; then
  line "${AS_WHO:-KBS} appraised az-snp-vtpm evidence: affirming (PCR 03, 08, 09, 11, 12 matched)" "ok"
else
  line "${AS_WHO:-KBS} appraised sample evidence: affirming" "ok"
fi
# The application (examples/app): the bundled dataset without a key, the encrypted one with it.
NODE="$ROOT/node_modules/.bin/node"
APP="$ROOT/examples/app/dataset-app.ts"
mkdir -p "$WORK/www"
"$ROOT/examples/encrypt-dataset.sh" "$WORK/dataset.key" "" "$WORK/www/dataset.enc" >>"$WORK/app.log" 2>&1 ||
  fail "encrypt the confidential dataset with the released key"
DATA_PORT=$("$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$NODE" -e 'const [f,p]=process.argv.slice(1);require("http").createServer((q,r)=>require("fs").createReadStream(f).pipe(r)).listen(+p,"127.0.0.1")' \
  "$WORK/www/dataset.enc" "$DATA_PORT" &
PIDS+=($!)
wait_for "dataset server" curl -sf -o /dev/null "http://127.0.0.1:$DATA_PORT/"
report=$(env -u DECRYPTION_KEY_PATH "$NODE" "$APP" 2>>"$WORK/app.log") || fail "application without DECRYPTION_KEY_PATH"
line "app without DECRYPTION_KEY_PATH: bundled dataset, $(printf '%s' "$report" | grep -o '"rows":[0-9]*' | cut -d: -f2) rows" "ok"
report=$(DATASET_URL="http://127.0.0.1:$DATA_PORT/dataset.enc" "$NODE" "$APP" 2>>"$WORK/app.log") ||
  fail "application with DECRYPTION_KEY_PATH"
case "$report" in
  *'"source":"http'*) line "app with DECRYPTION_KEY_PATH: downloaded and decrypted, $(printf '%s' "$report" | grep -o '"rows":[0-9]*' | cut -d: -f2) rows" "ok" ;;
  *) fail "application did not evaluate the downloaded dataset" ;;
esac

echo
echo "7. Lazy attestation: the sidecar polls default/attestation-status/status"
poll() { [ "$(curl -s http://127.0.0.1:8006/cdh/resource/default/attestation-status/status)" = "success" ]; }
for i in 1 2 3; do
  if poll; then line "poll $i: success" "ok"; else fail "poll $i"; fi
done

echo
echo "8. Flow C: a sealed secret in a /sealed volume"
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
echo "9. The operator revokes release: deny-all resource policy"
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
  echo "  $BIN/image-pull --policy $WORK/image-policy.json --kbs-url https://127.0.0.1:$KBS_PORT --kbs-cert $WORK/https.crt --plain-http docker://$UNSIGNED_IMAGE $WORK/bundles/try"
  echo "  $BIN/kbs-client --url https://127.0.0.1:$KBS_PORT --cert-file $WORK/https.crt config --auth-private-key $WORK/admin.key get-resource-policy"
  echo "Operator console: https://127.0.0.1:$KBS_PORT/console/ (certificate: $WORK/https.crt); sign in with this admin JWT (2 h):"
  echo "  $(console_token)"
  echo "Stop it with: kill ${PIDS[*]}; rm -rf $WORK"
  echo "work folder (it holds the demo's private keys): $WORK"
  trap - EXIT
else
  echo "10. Stopping the stack"
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  line "all processes stopped (KBS$([ "$SPLIT" = 1 ] && echo ', AS, RVPS'), registry, AA, CDH, api-server-rest$([ "$TEE" = az-snp-vtpm ] && echo ', mock TEE'))" "ok"
fi
