#!/usr/bin/python3
"""An independent client of trustee's gRPC services, for the interop test.

Generates Python stubs from trustee's protos with Debian's protoc and grpc_python_plugin into a
temporary folder, then drives the RVPS and the attestation service with Debian's python3-grpcio and
checks the EAR token's ES256 signature with python3-cryptography. Nothing of ours is used here: the
evidence, its runtime-data binding and the token check are written from trustee's definitions.

Usage: trustee_grpc_client.py PROTO_DIR RVPS_ADDR AS_ADDR POLICY_FILE [REST_URL]
(the policy is set as `svn_cpu` and evaluated as `svn`)
Prints one JSON object with what it saw; exits non-zero on an unexpected failure.
"""
import base64
import hashlib
import importlib
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import grpc
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def stubs(proto_dir: str, out: str):
    subprocess.run(
        [
            "protoc",
            f"-I{proto_dir}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
            f"{proto_dir}/attestation.proto",
            f"{proto_dir}/reference.proto",
        ],
        check=True,
    )
    sys.path.insert(0, out)
    return tuple(
        importlib.import_module(m)
        for m in ("attestation_pb2", "attestation_pb2_grpc", "reference_pb2", "reference_pb2_grpc")
    )


def verify_es256(token: str) -> dict:
    """Checks the JWS signature with the P-256 key in the header's jwk; returns the payload."""
    head, body, sig = token.split(".")
    header = json.loads(b64url_decode(head))
    assert header["alg"] == "ES256", header
    jwk = header["jwk"]
    key = ec.EllipticCurvePublicNumbers(
        int.from_bytes(b64url_decode(jwk["x"]), "big"),
        int.from_bytes(b64url_decode(jwk["y"]), "big"),
        ec.SECP256R1(),
    ).public_key()
    raw = b64url_decode(sig)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    try:
        # A flipped payload must fail: the check above is not vacuous.
        key.verify(der, f"{head}.{body}x".encode(), ec.ECDSA(hashes.SHA256()))
        raise AssertionError("tampered token verified")
    except InvalidSignature:
        pass
    return json.loads(b64url_decode(body))


def main() -> None:
    proto_dir, rvps_addr, as_addr, policy_file = sys.argv[1:5]
    result = {}
    with tempfile.TemporaryDirectory() as out:
        attestation_pb2, attestation_grpc, reference_pb2, reference_grpc = stubs(proto_dir, out)
        with grpc.insecure_channel(rvps_addr) as rvps_channel, grpc.insecure_channel(as_addr) as as_channel:
            rvps = reference_grpc.ReferenceValueProviderServiceStub(rvps_channel)
            values = {"svn": ["3"]}
            message = {
                "version": "0.1.0",
                "type": "sample",
                "payload": base64.b64encode(json.dumps(values).encode()).decode(),
            }
            rvps.RegisterReferenceValue(reference_pb2.ReferenceValueRegisterRequest(message=json.dumps(message)))
            got = rvps.QueryReferenceValue(reference_pb2.ReferenceValueQueryRequest(reference_value_id="svn"))
            result["query"] = got.reference_value_results if got.HasField("reference_value_results") else None
            unknown = rvps.QueryReferenceValue(
                reference_pb2.ReferenceValueQueryRequest(reference_value_id="__healthcheck__")
            )
            result["unknown_has_field"] = unknown.HasField("reference_value_results")
            try:
                rvps.RegisterReferenceValue(
                    reference_pb2.ReferenceValueRegisterRequest(message=json.dumps({**message, "version": "9"}))
                )
                result["bad_version"] = "accepted"
            except grpc.RpcError as e:
                result["bad_version"] = {"code": e.code().name, "details": e.details()}

            service = attestation_grpc.AttestationServiceStub(as_channel)
            with open(policy_file, "rb") as f:
                service.SetAttestationPolicy(attestation_pb2.SetPolicyRequest(policy_id="svn_cpu", policy=b64url(f.read())))
            runtime_data = {"nonce": "python-nonce", "tee-pubkey": {"kty": "EC", "crv": "P-256", "x": "a", "y": "b"}}
            # RFC 8785 for these ASCII keys and strings: sorted keys, no whitespace.
            canonical = json.dumps(runtime_data, sort_keys=True, separators=(",", ":")).encode()
            evidence = {"svn": "3", "report_data": base64.b64encode(hashlib.sha384(canonical).digest()).decode()}
            request = attestation_pb2.AttestationRequest(
                verification_requests=[
                    attestation_pb2.IndividualAttestationRequest(
                        tee="sample",
                        evidence=b64url(json.dumps(evidence).encode()),
                        structured_runtime_data=json.dumps(runtime_data),
                        runtime_data_hash_algorithm="sha384",
                    )
                ],
                policy_ids=["svn"],
            )
            token = service.AttestationEvaluate(request).attestation_token
            claims = verify_es256(token)
            cpu0 = claims["submods"]["cpu0"]
            result["token"] = {
                "iss": claims.get("iss"),
                "status": cpu0["ear.status"],
                "executables": cpu0["ear.trustworthiness-vector"].get("executables"),
                "policy": cpu0["ear.appraisal-policy-id"],
                "runtime_data_claims": cpu0["ear.veraison.annotated-evidence"]["runtime_data_claims"],
            }
            evidence["report_data"] = base64.b64encode(hashlib.sha384(b"other").digest()).decode()
            request.verification_requests[0].evidence = b64url(json.dumps(evidence).encode())
            try:
                service.AttestationEvaluate(request)
                result["mismatch"] = "accepted"
            except grpc.RpcError as e:
                result["mismatch"] = {"code": e.code().name, "details": e.details().split("\n")[0]}
            if len(sys.argv) > 5:
                result["rest"] = rest(sys.argv[5], runtime_data)
    print(json.dumps(result))


def rest(base: str, runtime_data: dict) -> dict:
    """trustee's restful-as: POST /attestation with its JSON body; the token checked against the JWKS route."""
    canonical = json.dumps(runtime_data, sort_keys=True, separators=(",", ":")).encode()
    evidence = {"svn": "3", "report_data": base64.b64encode(hashlib.sha384(canonical).digest()).decode()}
    body = {
        "verification_requests": [
            {
                "tee": "sample",
                "evidence": b64url(json.dumps(evidence).encode()),
                "runtime_data": {"structured": runtime_data},
                "runtime_data_hash_algorithm": "sha384",
            }
        ],
        "policy_ids": ["svn"],
    }
    req = urllib.request.Request(
        f"{base}/attestation", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req) as res:
        token = res.read().decode()
    with urllib.request.urlopen(f"{base}/.well-known/jwks.json") as res:
        jwks = json.loads(res.read())
    claims = verify_es256(token)
    header = json.loads(b64url_decode(token.split(".")[0]))
    out = {
        "executables": claims["submods"]["cpu0"]["ear.trustworthiness-vector"].get("executables"),
        "jwks_has_signer": any(k.get("x") == header["jwk"]["x"] and k.get("y") == header["jwk"]["y"] for k in jwks["keys"]),
    }
    body["verification_requests"][0]["tee"] = "tpm"
    try:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{base}/attestation", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
        )
        out["tpm"] = "accepted"
    except urllib.error.HTTPError as e:
        out["tpm"] = {"status": e.code, "body": e.read().decode().split("\n")[0]}
    return out


if __name__ == "__main__":
    main()
