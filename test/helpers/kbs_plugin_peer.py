#!/usr/bin/python3
"""An external KBS plugin written against trustee's plugin.proto only, for the interop test.

Generates the stubs from plugin.proto with Debian's protoc and grpc_python_plugin into a temporary
folder and serves kbs.plugin.v1.KbsPlugin with Debian's python3-grpcio. Nothing of ours is used here.

Behaviour (chosen to exercise every field): ValidateAuth asks for admin auth on PUT; NeedsEncryption
on any request whose query has encrypt=yes. Handle answers a JSON description of the request
(method, path, query, sha256 of the body); a path whose first segment is "teapot" gets status_code
418 (the KBS must turn that into an error), and "huge" a 17 MiB body (over the KBS's reply limit).

Usage: kbs_plugin_peer.py PROTO_DIR
Prints "PORT <n>" once listening on 127.0.0.1 (a free port), then serves until stdin closes.
"""
import hashlib
import importlib
import json
import subprocess
import sys
import tempfile
from concurrent import futures

import grpc


def stubs(proto_dir: str, out: str):
    subprocess.run(
        [
            "protoc",
            f"-I{proto_dir}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
            f"{proto_dir}/plugin.proto",
        ],
        check=True,
    )
    sys.path.insert(0, out)
    return importlib.import_module("plugin_pb2"), importlib.import_module("plugin_pb2_grpc")


def main() -> None:
    with tempfile.TemporaryDirectory() as out:
        pb, pb_grpc = stubs(sys.argv[1], out)

        class Plugin(pb_grpc.KbsPluginServicer):
            def Handle(self, request, context):
                described = {
                    "peer": "python",
                    "method": request.method,
                    "path": list(request.path),
                    "query": dict(request.query),
                    "body_sha256": hashlib.sha256(request.body).hexdigest(),
                }
                status = 418 if request.path[:1] == ["teapot"] else 200
                if request.path[:1] == ["huge"]:
                    return pb.PluginResponse(body=b"x" * (17 * 1024 * 1024), status_code=200)
                return pb.PluginResponse(
                    body=json.dumps(described, sort_keys=True).encode(),
                    status_code=status,
                    content_type="application/json",
                )

            def ValidateAuth(self, request, context):
                return pb.ValidateAuthResponse(requires_admin_auth=request.method == "PUT")

            def NeedsEncryption(self, request, context):
                return pb.NeedsEncryptionResponse(
                    requires_payload_encryption=request.query.get("encrypt") == "yes"
                )

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_KbsPluginServicer_to_server(Plugin(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        print(f"PORT {port}", flush=True)
        sys.stdin.read()
        server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
