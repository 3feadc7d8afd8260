"""A Paddle Lite Python script, with only its import changed, runs on nnadapter-bridge.

The scripts are written to files and run as separate Python processes, the way a user runs them.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Written the way Paddle Lite's NNAdapter docs write it; only the import line differs.
CXX_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from nnadapter_bridge.lite import *

    model_file, param_file, cache_dir, input_file, output_file = sys.argv[1:]
    config = CxxConfig()
    config.set_model_file(model_file)
    config.set_param_file(param_file)
    config.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32),
                             Place(TargetType.X86, PrecisionType.FP32)])
    config.set_nnadapter_device_names(["builtin_device"])
    config.set_nnadapter_context_properties("")
    config.set_nnadapter_model_cache_dir(cache_dir)
    config.set_threads(1)
    print(config.nnadapter_device_names(), config.nnadapter_model_cache_dir())
    predictor = create_paddle_predictor(config)
    input_tensor = predictor.get_input(0)
    input_tensor.from_numpy(np.load(input_file))
    predictor.run()
    output_tensor = predictor.get_output(0)
    print(output_tensor.shape())
    np.save(output_file, output_tensor.numpy())
""")

MOBILE_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from nnadapter_bridge.lite import *

    model_file, input_file, output_file = sys.argv[1:]
    config = MobileConfig()
    config.set_model_from_file(model_file)
    config.set_power_mode(PowerMode.LITE_POWER_HIGH)
    config.set_nnadapter_device_names(["builtin_device"])
    config.set_nnadapter_dynamic_shape_info({"x": [[1, 4], [2, 4]]})
    predictor = create_paddle_predictor(config)
    data = np.load(input_file)
    input_tensor = predictor.get_input(0)
    input_tensor.resize(list(data.shape))
    input_tensor.set_float_data(data.reshape(-1).tolist())
    predictor.run()
    output = predictor.get_output(0)
    np.save(output_file, np.array(output.float_data(), dtype=np.float32).reshape(output.shape()))
""")


def run_script(tmp_path, text, *args) -> str:
    script = tmp_path / "script.py"
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_cxx_config_script_runs(tmp_path):
    model = add_relu_scale_model(tmp_path / "m")
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    stdout = run_script(tmp_path, CXX_SCRIPT, model, model.replace(".pdmodel", ".pdiparams"), tmp_path / "cache",
                        tmp_path / "x.npy", tmp_path / "out.npy")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), reference_add_relu_scale(x), rtol=1e-6, atol=1e-6)
    assert "['builtin_device']" in stdout and "[2, 4]" in stdout
    assert list((tmp_path / "cache").glob("*.nnc"))


def test_a_mobile_config_script_runs(tmp_path):
    model = add_relu_scale_model(tmp_path / "m")
    x = np.linspace(-1, 3, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    run_script(tmp_path, MOBILE_SCRIPT, model, tmp_path / "x.npy", tmp_path / "out.npy")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), reference_add_relu_scale(x), rtol=1e-6, atol=1e-6)


def test_lite_names_are_the_bridge_objects():
    import nnadapter_bridge as nb
    from nnadapter_bridge import lite

    assert issubclass(lite.CxxConfig, nb.Config) and issubclass(lite.MobileConfig, nb.Config)
    assert lite.CxxPredictor is nb.Predictor
    assert lite.Place(lite.TargetType.NNAdapter).precision == lite.PrecisionType.FP32
