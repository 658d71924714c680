#!/usr/bin/env python3
"""Builds an OCI image layout with one ocicrypt-encrypted layer whose key is wrapped for the CoCo
`attestation-agent` key provider, independently of the project's TypeScript code (Python and
Debian's python3-cryptography only), from the published format:

- layer: gzip of a tar holding the given files; AES-256-CTR with a random 32-byte key and the random
  16-byte nonce as the initial counter block; HMAC-SHA256 over the ciphertext keyed with the same key;
- private options {"symkey","digest","cipheroptions":{"nonce"}} (standard base64), wrapped with
  AES-256-GCM under the KEK (12-byte IV, no AAD, ciphertext||tag) into coco-keyprovider's packet
  {"kid","wrapped_data","iv","wrap_type":"A256GCM"} with byte fields as arrays of numbers;
- annotations org.opencontainers.image.enc.keys.provider.attestation-agent (base64 of the packet)
  and org.opencontainers.image.enc.pubopts (base64 of {"cipher","hmac","cipheroptions":{}}).

usage: coco_encrypt_image.py OUT_DIR TAG KEK_FILE KID PATH=TEXT...
"""
import base64
import gzip
import hashlib
import hmac
import io
import json
import os
import sys
import tarfile

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_blob(out: str, data: bytes) -> dict:
    digest = sha256(data)
    with open(os.path.join(out, "blobs", "sha256", digest[7:]), "wb") as f:
        f.write(data)
    return {"digest": digest, "size": len(data)}


def main() -> None:
    out, tag, kek_file, kid = sys.argv[1:5]
    files = [arg.split("=", 1) for arg in sys.argv[5:]]
    with open(kek_file, "rb") as f:
        kek = f.read()

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, text in files:
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    layer_tar = raw.getvalue()
    plain = gzip.compress(layer_tar, mtime=0)

    symkey, nonce = os.urandom(32), os.urandom(16)
    encryptor = Cipher(algorithms.AES(symkey), modes.CTR(nonce)).encryptor()
    ciphertext = encryptor.update(plain) + encryptor.finalize()
    mac = hmac.new(symkey, ciphertext, hashlib.sha256).digest()

    private_opts = json.dumps(
        {"symkey": b64(symkey), "digest": sha256(plain), "cipheroptions": {"nonce": b64(nonce)}}
    ).encode()
    iv = os.urandom(12)
    wrapped = AESGCM(kek).encrypt(iv, private_opts, None)
    packet = {"kid": kid, "wrapped_data": list(wrapped), "iv": list(iv), "wrap_type": "A256GCM"}
    pubopts = {"cipher": "AES_256_CTR_HMAC_SHA256", "hmac": b64(mac), "cipheroptions": {}}

    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    layer = write_blob(out, ciphertext)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": [sha256(layer_tar)]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **write_blob(out, config)},
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip+encrypted",
                    **layer,
                    "annotations": {
                        "org.opencontainers.image.enc.keys.provider.attestation-agent": b64(
                            json.dumps(packet).encode()
                        ),
                        "org.opencontainers.image.enc.pubopts": b64(json.dumps(pubopts).encode()),
                    },
                }
            ],
        }
    ).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **write_blob(out, manifest),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


if __name__ == "__main__":
    main()
