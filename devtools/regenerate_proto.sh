#!/usr/bin/env bash
# Regenerates framework_pb2.py and its type stub framework_pb2.pyi (what mypy and editors read: the .py builds
# its classes at import time) from framework.proto with the protoc bundled in grpcio-tools, pinned below: it
# reproduces the committed framework_pb2.py byte for byte.
# Usage: devtools/regenerate_proto.sh [python]   (default: the repo's .venv, else python3; it needs
# `pip install grpcio-tools==1.85.1`)
# After regenerating, set pyproject's `protobuf>=` bound to the version the new gencode checks for
# (see the ValidateProtobufRuntimeVersion call near the top of framework_pb2.py).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LOADER="$ROOT/nnadapter_bridge/loader"  # framework.proto and its generated module are the loader's
PY="${1:-}"
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
GRPCIO_TOOLS_VERSION=1.85.1  # protoc 35.1: gencode for protobuf >= 7.35.1
found=$("$PY" -c "import importlib.metadata as m; print(m.version('grpcio-tools'))" 2>/dev/null || echo none)
if [ "$found" != "$GRPCIO_TOOLS_VERSION" ]; then
  echo "$PY has grpcio-tools $found; this script is pinned to $GRPCIO_TOOLS_VERSION:" >&2
  echo "  $PY -m pip install grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
  exit 1
fi
cd "$LOADER"
"$PY" -m grpc_tools.protoc --proto_path=. --python_out=. --pyi_out=. framework.proto
# paddlepaddle registers its own copy of package `paddle.framework.proto` in protobuf's default descriptor
# pool; registering ours there too fails ("duplicate symbol") whichever is imported second. So our module
# gets a private pool: same wire format, no shared names.
sed -i 's/^DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(/_POOL = _descriptor_pool.DescriptorPool()  # private: see regenerate_proto.sh\nDESCRIPTOR = _POOL.AddSerializedFile(/' framework_pb2.py
grep -q '^_POOL = _descriptor_pool.DescriptorPool()' framework_pb2.py || { echo "private-pool patch failed" >&2; exit 1; }
echo "regenerated $LOADER/framework_pb2.py and framework_pb2.pyi"
grep -n "ValidateProtobufRuntimeVersion" -A 7 framework_pb2.py | head -10
