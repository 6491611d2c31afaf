"""Regenerate the checked-in gRPC code from proto/ (run from the repository root).

    python -m ppsvm.wire.rpc.generate

The `-I ppsvm/wire/rpc=proto` mapping makes the generated imports read
`from ppsvm.wire.rpc import ppsvm_pb2`, so they resolve inside the `ppsvm` package.
The generator version is pinned in pyproject.toml (`grpcio-tools`); a unit test
regenerates into a temporary directory and diffs against the checked-in files.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PROTO_FILE = "ppsvm/wire/rpc/ppsvm.proto"
GENERATED = ("ppsvm_pb2.py", "ppsvm_pb2.pyi", "ppsvm_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    """Run protoc on proto/ppsvm.proto, writing the stubs under ``out_dir/ppsvm/wire/rpc``."""
    from grpc_tools import protoc  # build-time dependency only

    (out_dir / "ppsvm" / "wire" / "rpc").mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-Ippsvm/wire/rpc={REPO_ROOT / 'proto'}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        PROTO_FILE,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT)
