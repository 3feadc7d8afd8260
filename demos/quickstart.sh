#!/usr/bin/env bash
# Sets up a virtual environment (.venv) with the paddle extra, builds a random-weight MobileNetV1 in the
# legacy Paddle inference format, and inspects it with nnadapter-bridge.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -e ".[paddle]"
MODELS=${NNADAPTER_BRIDGE_DEMO_DIR:-${TMPDIR:-/tmp}/nnadapter-bridge-demo}
if [ ! -e "$MODELS/mobilenet_v1" ]; then
  .venv/bin/python -m nnadapter_bridge.zoo mobilenet_v1 "$MODELS/mobilenet_v1"
fi
.venv/bin/nnadapter-bridge inspect "$MODELS/mobilenet_v1"
