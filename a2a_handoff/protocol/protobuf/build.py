"""Compile the specification's `a2a.proto` into the descriptor set the gRPC face and client load
(`scripts/protos`): a development step, never run by a served agent.

    python -m a2a_handoff.protocol.protobuf.build [--check]

The set holds `a2a.proto`, every file it imports (`google/api/*`, the well-known types) and
the `google.rpc` error messages (`Status`, `ErrorInfo`, `BadRequest`), so that the face needs
nothing at run time but `protobuf` and `grpcio`. It needs `grpcio-tools` (the compiler) and
`googleapis-common-protos` (the `google/api` and `google/rpc` sources), both in the dev extra.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "a2a.proto"
DESCRIPTORS = HERE / "a2a.binpb"
ALSO = ("google/rpc/status.proto", "google/rpc/error_details.proto")


def compile_descriptors() -> bytes:
    """The descriptor set `a2a.proto` compiles to now (serialized `FileDescriptorSet`)."""
    try:
        import google.rpc
        from grpc_tools import protoc
    except ImportError as exc:
        raise SystemExit(
            "compiling a2a.proto needs grpcio-tools and googleapis-common-protos:"
            " pip install -e '.[dev]'"
        ) from exc
    googleapis = Path(next(iter(google.rpc.__path__))).parent.parent  # holds google/rpc/*.proto
    builtin = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "a2a.binpb"
        argv = [
            "protoc",
            f"-I{HERE}",
            f"-I{googleapis}",
            f"-I{builtin}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            PROTO.name,
            *ALSO,
        ]
        if protoc.main(argv) != 0:
            raise SystemExit("protoc failed on a2a.proto")
        return out.read_bytes()


def main(argv: list[str]) -> int:
    compiled = compile_descriptors()
    if "--check" in argv:
        same = DESCRIPTORS.exists() and DESCRIPTORS.read_bytes() == compiled
        if not same:
            print(f"{DESCRIPTORS} is not what {PROTO.name} compiles to: run scripts/protos")
        return 0 if same else 1
    DESCRIPTORS.write_bytes(compiled)
    print(f"wrote {DESCRIPTORS} ({len(compiled)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
