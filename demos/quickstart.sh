#!/usr/bin/env bash
# One command: set up a virtual environment (.venv) with the paddle extra, then run the classification demo
# (demos/classify.py): a random-weight MobileNetV1 exported the Paddle 3 way (PIR .json + .pdiparams) runs on
# builtin_device, is compiled
# once into a .nnc model cache, restored from it by a second predictor, and checked against Paddle Inference.
# Idempotent: a second invocation finds the install satisfied (pip checks it, so dependencies added later
# still arrive) and reuses the model (kept in $NNADAPTER_BRIDGE_DEMO_DIR, default $TMPDIR/nnadapter-bridge-demo).
# Extra arguments go to classify.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NNADAPTER_BRIDGE_VENV:-.venv}  # another environment to set up and use, e.g. the one CI made
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -e ".[paddle]"
exec "$VENV/bin/python" demos/classify.py --device builtin_device "$@"
