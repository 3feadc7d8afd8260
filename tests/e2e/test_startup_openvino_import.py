"""Issue 31: intel_openvino imports openvino without its model converter (`openvino.tools.ovc`, ~90 ms of the
import: its telemetry, importlib.metadata, numpy.ma, the TensorFlow frontend), and `openvino.convert_model` still
works in that process. Each case runs in a fresh interpreter, where openvino is not imported yet."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("openvino")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str) -> str:
    found = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert found.returncode == 0, found.stderr[-2000:]
    return found.stdout.strip()


def test_the_driver_imports_openvino_without_its_converter_which_loads_on_first_use():
    out = _run("""
        import sys
        from hal.intel_openvino.driver import DRIVER
        device = DRIVER.open_device()
        import openvino
        assert "openvino.tools.ovc" not in sys.modules and "openvino_telemetry" not in sys.modules
        assert "convert_model" not in vars(openvino) and not hasattr(openvino, "no_such_name")
        from openvino import convert_model  # the converter, imported now
        import openvino.tools.ovc
        assert convert_model is openvino.tools.ovc.convert_model is openvino.convert_model
        print(convert_model.__module__)
    """)
    assert out == "openvino.tools.ovc.convert"


def test_an_openvino_imported_before_the_driver_is_left_as_it_is():
    out = _run("""
        import openvino
        from hal.intel_openvino.driver import DRIVER
        DRIVER.open_device()
        assert "__getattr__" not in vars(openvino)
        print(openvino.convert_model.__module__)
    """)
    assert out == "openvino.tools.ovc.convert"


def test_only_the_importing_thread_leaves_the_converter_out():
    out = _run("""
        import threading
        from hal.intel_openvino.driver import _SkipModelConverter
        finder = _SkipModelConverter()
        try:
            finder.find_spec("openvino.tools.ovc")
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("the importing thread imports the converter")
        seen = []
        thread = threading.Thread(target=lambda: seen.append(finder.find_spec("openvino.tools.ovc")))
        thread.start()
        thread.join()
        print(seen, finder.find_spec("openvino.runtime"))
    """)
    assert out == "[None] None"


def test_an_own_module_getattr_of_openvino_still_answers_other_names():
    import types

    from hal.intel_openvino.driver import _convert_model_on_first_use

    def own_getattr(name):
        if name == "answer":
            return 42
        raise AttributeError(name)

    module = types.ModuleType("openvino_like")
    module.__getattr__ = own_getattr
    _convert_model_on_first_use(module)
    assert module.answer == 42 and not hasattr(module, "no_such_name")
    from openvino.tools.ovc import convert_model

    assert module.convert_model is convert_model and "convert_model" in vars(module)
