#!/usr/bin/env bash
# Flow A with an encrypted image, as a step of scripts/demo.sh (or on its own against a running demo stack):
# a test image is encrypted with `image-policy encrypt` for the attestation-agent key provider, its layer key
# wrapped with a KEK stored in the KBS under kbs:///default/image-kek/hello-encrypted; the guest's CDH pulls
# it (PullImage), fetching the KEK by that id after attestation, and unpacks it. Then a second image whose
# KEK the resource policy withholds: the pull fails with image-rs' error and leaves no rootfs.
#   scripts/demo-encrypted-image.sh WORK KBS_URL REGISTRY [CDH_SOCKET]
# WORK is the demo's work folder; it must hold https.crt (the KBS's certificate), admin.key (the KBS admin
# key), image-keys/workshop.key (the key the image policy trusts for REGISTRY/signed) and, when the demo
# made it, image-tool.cjs (bundled here otherwise). kbs.log, when present, is the KBS's access log, read
# to show which resources the pulls fetched. REGISTRY is the demo's plain-http registry (HOST:PORT).
# CDH_SOCKET defaults to the CDH's upstream socket. The resource policy is trustee's affirming one
# before and after (the demo's); this step replaces it for the denied pull.
# Exit status: 0 every step passed, 1 a step failed, 2 usage error.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/dist/bin
NODE=$ROOT/node_modules/.bin/node
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
case "${1:-}" in
  -h | --help)
    usage
    exit 0
    ;;
esac
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  usage >&2
  exit 2
fi
WORK=$1
KBS_URL=$2
REG=$3
CDH_SOCKET=${4:-}
for f in https.crt admin.key image-keys/workshop.key; do
  [ -f "$WORK/$f" ] || { echo "$WORK/$f is missing: WORK must be the demo's work folder" >&2; exit 2; }
done
for b in image-policy kbs-client; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: run make build" >&2; exit 1; }
done

line() { printf '  %-74s %s\n' "$1" "$2"; }
fail() {
  line "$1" "FAILED"
  echo "    logs: $WORK/encrypted-image.log, $WORK/pull-encrypted*.log" >&2
  exit 1
}
LOG=$WORK/encrypted-image.log
admin() { "$BIN/kbs-client" --url "$KBS_URL" --cert-file "$WORK/https.crt" config --auth-private-key "$WORK/admin.key" "$@" >>"$LOG" 2>&1; }
if [ ! -f "$WORK/image-tool.cjs" ]; then
  # The demo's flow A client, bundled as demo.sh bundles it.
  "$ROOT/node_modules/.bin/esbuild" "$ROOT/test/helpers/image-tool.ts" --bundle --platform=node --target=node24 --format=cjs \
    --define:import.meta.url=__image_tool_url --banner:js='const __image_tool_url = require("url").pathToFileURL(__filename).href;' \
    --outfile="$WORK/image-tool.cjs" --log-level=warning || { echo "could not bundle test/helpers/image-tool.ts" >&2; exit 1; }
fi
image_tool() { "$NODE" "$WORK/image-tool.cjs" "$@"; }
pull() { # pull IMAGE BUNDLE: PullImage through the CDH socket
  if [ -n "$CDH_SOCKET" ]; then image_tool pull --cdh-socket "$CDH_SOCKET" "$@"; else image_tool pull "$@"; fi
}
kbs_log_settled() { # every KBS request answered so far is in kbs.log once this marker (the user agent) is
  local marker="sync-$RANDOM$RANDOM"
  curl -sf -o /dev/null -A "$marker" --cacert "$WORK/https.crt" "$KBS_URL/healthz" || return 1
  for _ in $(seq 1 200); do
    grep -q "\"ua\":\"$marker\"" "$WORK/kbs.log" && return 0
    sleep 0.05
  done
  return 1
}
kbs_fetched() { # kbs_fetched PATH: the KBS's access log shows a GET of resource PATH
  [ -f "$WORK/kbs.log" ] || return 0
  kbs_log_settled || return 1
  grep -q "\"method\":\"GET\",\"path\":\"/kbs/v0/resource/$1\"" "$WORK/kbs.log"
}
kbs_denied() { # kbs_denied PATH: the KBS's access log shows a GET of resource PATH answered 401 (PolicyDeny)
  [ -f "$WORK/kbs.log" ] || return 0
  kbs_log_settled || return 1
  grep -q "\"method\":\"GET\",\"path\":\"/kbs/v0/resource/$1\",\"status\":401" "$WORK/kbs.log"
}
layer_types() { # layer_types REPO TAG: the media types of the manifest's layers
  curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REG/v2/$1/manifests/$2" |
    grep -o '"mediaType":"application/vnd.oci.image.layer[^"]*"' | cut -d'"' -f4 | sort -u | tr '\n' ' '
}

echo "5b. Flow A with an encrypted image (ocicrypt, the attestation-agent key provider; KEK released by the KBS)"
SOURCE=$REG/staging/hello-secret:v1
ENCRYPTED=$REG/signed/hello-encrypted:v1
WITHHELD=$REG/signed/hello-withheld:v1
rm -rf "$WORK/bundles/encrypted-pod" "$WORK/bundles/withheld-pod" # from an earlier run against the same stack
image_tool push "$SOURCE" "app/secret.txt=hello from an encrypted layer" >>"$LOG" 2>&1 || fail "build and push $SOURCE"
line "built and pushed the plain image $SOURCE" "ok"
mkdir -p "$WORK/image-keys"
(umask 077 && head -c 32 /dev/urandom >"$WORK/image-keys/hello-encrypted.kek" && head -c 32 /dev/urandom >"$WORK/image-keys/withheld.kek")
admin set-resource --path default/image-kek/hello-encrypted --resource-file "$WORK/image-keys/hello-encrypted.kek" &&
  admin set-resource --path default/image-kek/withheld --resource-file "$WORK/image-keys/withheld.kek" ||
  fail "store the KEKs in the KBS"
line "stored two 32-byte KEKs: default/image-kek/{hello-encrypted,withheld}" "ok"
for pair in "$ENCRYPTED=hello-encrypted" "$WITHHELD=withheld"; do
  ref=${pair%=*}
  name=${pair#*=}
  "$BIN/image-policy" encrypt --plain-http \
    --encryption-key "provider:attestation-agent:keyid=kbs:///default/image-kek/$name::keypath=$WORK/image-keys/$name.kek" \
    "docker://$SOURCE" "docker://$ref" >>"$LOG" 2>&1 || fail "image-policy encrypt $ref"
  "$BIN/image-policy" sign --key "$WORK/image-keys/workshop.key" --plain-http "docker://$ref" >>"$LOG" 2>&1 ||
    fail "image-policy sign $ref"
done
repo=${ENCRYPTED#"$REG"/}
types=$(layer_types "${repo%:*}" "${repo##*:}")
case "$types" in
  *+encrypted*) types=${types% } ;;
  *) fail "$ENCRYPTED: the layers are not encrypted ($types)" ;;
esac
line "image-policy encrypt + sign: $ENCRYPTED" "ok"
line "  layer ${types##*/}" "ok"
line "  layer key wrapped for kid kbs:///default/image-kek/hello-encrypted" "ok"
line "image-policy encrypt + sign: $WITHHELD" "ok"

digest=$(pull "$ENCRYPTED" "$WORK/bundles/encrypted-pod" 2>"$WORK/pull-encrypted.log") ||
  fail "PullImage $ENCRYPTED: $(cat "$WORK/pull-encrypted.log")"
line "PullImage $ENCRYPTED: pulled ${digest:0:15}..." "ok"
[ "$(cat "$WORK/bundles/encrypted-pod/rootfs/app/secret.txt")" = "hello from an encrypted layer" ] ||
  fail "the decrypted rootfs lacks app/secret.txt"
line "bundle rootfs/app/secret.txt: \"$(cat "$WORK/bundles/encrypted-pod/rootfs/app/secret.txt")\"" "ok"
kbs_fetched default/image-kek/hello-encrypted || fail "KBS log: the KEK default/image-kek/hello-encrypted was not fetched"
[ ! -f "$WORK/kbs.log" ] || line "KBS log: the CDH fetched the KEK default/image-kek/hello-encrypted" "ok"

# Trustee's affirming policy, except for the one KEK.
cat >"$WORK/resource-policy-withhold.rego" <<'REGO'
package policy
import rego.v1

default allow = false

allow if {
    not any_not_affirming
    count(input.submods) > 0
    not withheld
}

any_not_affirming if {
    some _, submod in input.submods
    submod["ear.status"] != "affirming"
}

withheld if {
    data["resource-path"] == ["default", "image-kek", "withheld"]
}
REGO
admin set-resource-policy --policy-file "$WORK/resource-policy-withhold.rego" ||
  fail "resource policy: withhold default/image-kek/withheld"
line "resource policy: affirming, except default/image-kek/withheld" "ok"
if pull "$WITHHELD" "$WORK/bundles/withheld-pod" >"$WORK/pull-encrypted-withheld.out.log" 2>"$WORK/pull-encrypted-withheld.log"; then
  admin set-resource-policy --affirming || true
  fail "PullImage $WITHHELD: pulled, but the KBS withholds its KEK"
fi
admin set-resource-policy --affirming || fail "resource policy: back to affirming"
grep -qF 'Failed to decrypt the image layer, please ensure that the decryption key is placed and correct' \
  "$WORK/pull-encrypted-withheld.log" || fail "PullImage $WITHHELD: unexpected error: $(cat "$WORK/pull-encrypted-withheld.log")"
line "PullImage $WITHHELD: refused" "ok"
echo "    $(cat "$WORK/pull-encrypted-withheld.log")"
kbs_denied default/image-kek/withheld || fail "KBS log: no denied GET of default/image-kek/withheld"
[ ! -f "$WORK/kbs.log" ] || line "KBS log: GET default/image-kek/withheld answered 401 (PolicyDeny)" "ok"
[ ! -e "$WORK/bundles/withheld-pod/rootfs" ] || fail "the refused image left a rootfs"
line "no rootfs; resource policy back to affirming" "ok"
