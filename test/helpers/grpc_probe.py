#!/usr/bin/python3
"""A gRPC client we did not write, for the deployer tests: Debian's python3-grpcio with hand-encoded
protobuf bytes (Debian ships no grpc_health module).

Usage: grpc_probe.py TARGET [tls=CA_PEM[:CERT_PEM:KEY_PEM]] STEP...
  tls=...          TLS trusting CA_PEM, with a client certificate when CERT_PEM and KEY_PEM are given
  health:SERVICE   grpc.health.v1.Health/Check for SERVICE (may be empty), as a Kubernetes grpc probe
                   asks; records the ServingStatus number (1 = SERVING) or the status code name
  set-policy       attestation.AttestationService/SetAttestationPolicy without credentials
  set-policy:JWT   the same with `authorization: Bearer JWT` metadata
Prints one JSON list with one entry per step.
"""
import base64
import json
import sys

import grpc

POLICY = b'package policy\ndefault executables := 33\ntrust_claims := {"executables": executables}\n'


def field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2) with a one- or two-byte length."""
    n = len(value)
    length = bytes([n]) if n < 128 else bytes([(n & 0x7F) | 0x80, n >> 7])
    return bytes([(number << 3) | 2]) + length + value


def call(channel, method: str, request: bytes, metadata=None):
    rpc = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    try:
        return rpc(request, timeout=10, metadata=metadata)
    except grpc.RpcError as e:
        return e


def main() -> None:
    target, steps = sys.argv[1], sys.argv[2:]
    if steps and steps[0].startswith("tls="):
        files = steps.pop(0)[len("tls="):].split(":")
        pems = [open(f, "rb").read() for f in files]
        creds = grpc.ssl_channel_credentials(
            root_certificates=pems[0],
            private_key=pems[2] if len(pems) == 3 else None,
            certificate_chain=pems[1] if len(pems) == 3 else None,
        )
        channel = grpc.secure_channel(target, creds)
    else:
        channel = grpc.insecure_channel(target)
    seen = []
    with channel:
        for step in steps:
            kind, _, arg = step.partition(":")
            if kind == "health":
                req = field(1, arg.encode()) if arg else b""
                res = call(channel, "/grpc.health.v1.Health/Check", req)
                if isinstance(res, grpc.RpcError):
                    seen.append(res.code().name)
                else:
                    # HealthCheckResponse: field 1, varint.
                    seen.append(res[1] if len(res) >= 2 and res[0] == 0x08 else 0)
            elif kind == "set-policy":
                policy = base64.urlsafe_b64encode(POLICY).rstrip(b"=")
                req = field(1, b"probe") + field(2, policy)
                md = [("authorization", "Bearer " + arg)] if arg else None
                res = call(channel, "/attestation.AttestationService/SetAttestationPolicy", req, md)
                if isinstance(res, grpc.RpcError):
                    seen.append([res.code().name, res.details()])
                else:
                    seen.append(["OK", ""])
            else:
                raise SystemExit(f"unknown step {step}")
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
