#!/usr/bin/env bash
# Encrypts a dataset for the demo (flow B): makes a 32-byte key when KEY does not exist yet, then writes
# the AES-256-GCM encrypted dataset the application downloads.
#
#   examples/encrypt-dataset.sh [KEY] [CSV] [OUT]
#     KEY  key file, 32 raw bytes (default dataset.key); store it in the KBS as the application secret:
#          kbs-client ... config set-resource --path default/dataset-key/key --resource-file dataset.key
#     CSV  plaintext dataset (default examples/app/data/confidential.csv)
#     OUT  encrypted dataset (default dataset.enc); serve it where DATASET_URL points
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KEY=${1:-dataset.key}
CSV=${2:-$HERE/app/data/confidential.csv}
OUT=${3:-dataset.enc}
# Node 24 runs the TypeScript file directly; the workspace pins it in node_modules/.bin.
NODE=$HERE/../node_modules/.bin/node
[ -x "$NODE" ] || NODE=node
if [ ! -e "$KEY" ]; then
  (umask 077 && head -c 32 /dev/urandom >"$KEY")
  echo "encrypt-dataset: new key in $KEY" >&2
fi
exec "$NODE" "$HERE/app/dataset-app.ts" encrypt --key "$KEY" --in "$CSV" --out "$OUT"
