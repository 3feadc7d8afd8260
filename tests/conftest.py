"""Shared pytest setup: the repo root on sys.path and the legacy (non-PIR) Paddle mode for fixtures."""
from __future__ import annotations

import os
import sys

# Paddle reads this flag at import: the legacy ProgramDesc format this project reads needs it off.
os.environ.setdefault("FLAGS_enable_pir_api", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
for sub in ("tests",):
    p = os.path.join(ROOT, sub)
    if p not in sys.path:
        sys.path.insert(0, p)
pytest_plugins = ["model_zoo_fixtures"]
