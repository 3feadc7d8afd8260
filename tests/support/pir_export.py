"""Paddle 3 PIR exports made by `paddle.jit.save` in a child interpreter: PIR export needs FLAGS_enable_pir_api unset,
and conftest sets it to 0 in the test process. The script is written to a real file (to_static reads the layers'
source) and gets the output directory as its one argument."""
from __future__ import annotations

import os
import subprocess
import sys


def export_in_child(root: str, script_text: str, name: str = "export_pir_models.py") -> None:
    """Run `script_text` with PIR on (Paddle's default) and `root` as sys.argv[1]; fails the test with its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    env["GLOG_minloglevel"] = "2"
    script = os.path.join(root, name)
    with open(script, "w") as f:
        f.write(script_text)
    proc = subprocess.run([sys.executable, script, root], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"PIR export failed:\n{proc.stderr[-3000:]}"
