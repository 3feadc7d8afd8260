"""The typed ground of pyproject.toml's [tool.mypy] (the loader, the NNAdapter standard, converters, partition),
checked by mypy in the suite as .ci/run checks it before the tests: a type error there fails with mypy's report.
And framework_pb2.pyi, the stub mypy reads for the generated framework_pb2.py, describes the same messages and
enums (devtools/regenerate_proto.sh writes both; a .py regenerated alone would leave the stub stale)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

from nnadapter_bridge.loader import framework_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mypy_passes_over_the_typed_ground():
    # No arguments: pyproject's [tool.mypy] says what to check, as in .ci/run.
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout, done.stdout[-2000:]


def _stub_classes(body: list, prefix: str = "") -> set:
    names = set()
    for node in body:
        if isinstance(node, ast.ClassDef):
            names.add(prefix + node.name)
            names |= _stub_classes(node.body, prefix + node.name + ".")
    return names


def _module_types(descriptors, prefix: str = "") -> set:
    names = set()
    for message in descriptors:
        names.add(prefix + message.name)
        names |= {prefix + message.name + "." + e.name for e in message.enum_types}
        names |= _module_types(message.nested_types, prefix + message.name + ".")
    return names


def test_the_stub_describes_the_generated_module():
    with open(framework_pb2.__file__ + "i", encoding="utf-8") as f:  # framework_pb2.pyi beside the .py
        stub = _stub_classes(ast.parse(f.read()).body)
    file = framework_pb2.DESCRIPTOR
    generated = _module_types(file.message_types_by_name.values()) | set(file.enum_types_by_name)
    assert stub == generated, (f"only in framework_pb2.py: {sorted(generated - stub)}; only in framework_pb2.pyi: "
                               f"{sorted(stub - generated)}; run devtools/regenerate_proto.sh")
