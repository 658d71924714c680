#!/usr/bin/python3
"""A gRPC client we did not write, for the deployer tests: Debian's python3-grpcio with stubs that
Debian's protoc and grpc_python_plugin generate into a temporary folder, as trustee_grpc_client.py does.

The messages come from their published definitions, not from our code:
- grpc/health/v1/health.proto: gRPC's own, as Debian ships it in golang-google-grpc-dev (the copy of
  grpc-proto its source package keeps under debian/missing-sources). No npm package in this repository
  ships it (grpc-js only implements the service) and Debian has no Python grpc_health module.
- attestation.proto: trustee's, from packages/trustee-protos/protos (see its PROVENANCE.md).

Usage: grpc_probe.py TARGET [tls=CA_PEM[:CERT_PEM:KEY_PEM]] STEP...
  tls=...          TLS trusting CA_PEM, with a client certificate when CERT_PEM and KEY_PEM are given
  health:SERVICE   grpc.health.v1.Health/Check for SERVICE (may be empty), as a Kubernetes grpc probe
                   asks; records the ServingStatus number (1 = SERVING) or the status code name
  set-policy       attestation.AttestationService/SetAttestationPolicy without credentials
  set-policy:JWT   the same with `authorization: Bearer JWT` metadata
Prints one JSON list with one entry per step.
"""
import base64
import importlib
import json
import os
import subprocess
import sys
import tempfile

import grpc

POLICY = b'package policy\ndefault executables := 33\ntrust_claims := {"executables": executables}\n'

HEALTH_PROTO = (
    "/usr/share/gocode/src/google.golang.org/grpc/debian/missing-sources/"
    "grpc/grpc-proto/master/grpc/health/v1/health.proto"
)
TRUSTEE_PROTOS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "packages", "trustee-protos", "protos"
)


def stubs(out: str):
    """health_pb2(_grpc) and attestation_pb2(_grpc), generated into `out` and imported from there."""
    if not os.path.isfile(HEALTH_PROTO):
        raise SystemExit(f"{HEALTH_PROTO} is missing: install Debian's golang-google-grpc-dev")
    # Each file from its own folder, so that the modules are top-level (health_pb2, not
    # grpc.health.v1.health_pb2, which the grpc package itself would shadow).
    for include, proto in ((os.path.dirname(HEALTH_PROTO), "health.proto"), (TRUSTEE_PROTOS, "attestation.proto")):
        subprocess.run(
            [
                "protoc",
                f"-I{include}",
                f"--python_out={out}",
                f"--grpc_python_out={out}",
                "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                os.path.join(include, proto),
            ],
            check=True,
        )
    sys.path.insert(0, out)
    return tuple(
        importlib.import_module(m)
        for m in ("health_pb2", "health_pb2_grpc", "attestation_pb2", "attestation_pb2_grpc")
    )


def call(rpc, request, metadata=None):
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
    with tempfile.TemporaryDirectory() as out, channel:
        health_pb2, health_grpc, as_pb2, as_grpc = stubs(out)
        health = health_grpc.HealthStub(channel)
        attestation = as_grpc.AttestationServiceStub(channel)
        for step in steps:
            kind, _, arg = step.partition(":")
            if kind == "health":
                res = call(health.Check, health_pb2.HealthCheckRequest(service=arg))
                seen.append(res.code().name if isinstance(res, grpc.RpcError) else res.status)
            elif kind == "set-policy":
                policy = base64.urlsafe_b64encode(POLICY).rstrip(b"=").decode()
                req = as_pb2.SetPolicyRequest(policy_id="probe", policy=policy)
                md = [("authorization", "Bearer " + arg)] if arg else None
                res = call(attestation.SetAttestationPolicy, req, md)
                if isinstance(res, grpc.RpcError):
                    seen.append([res.code().name, res.details()])
                else:
                    seen.append(["OK", ""])
            else:
                raise SystemExit(f"unknown step {step}")
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
