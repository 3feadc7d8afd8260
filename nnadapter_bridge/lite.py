"""Paddle Lite's Python names on top of nnadapter-bridge, so a Paddle Lite script ports by its import.

    from paddlelite.lite import *            ->   from nnadapter_bridge.lite import *

`CxxConfig` and `MobileConfig` are nnadapter_bridge.Config with the few Lite-only methods added;
`create_paddle_predictor` returns a nnadapter_bridge.Predictor (CxxPredictor and LightPredictor are its names).
`Place` in Config.set_valid_places decides whether the NNAdapter devices run (a Place(TargetType.NNAdapter)
in the list) or the whole model runs on the host (none). `get_version()` is this package's version (Paddle
Lite's module has it only on its predictors). What has no meaning here (OpenCL, Metal, Lite's optimizer passes)
raises NotSupportedError instead of doing nothing; docs/lite_api.md compares the whole surface with
paddlelite 2.13's. `MobileConfig.set_model_from_file` / `set_model_from_buffer` take Paddle Lite's optimized
`.nb` models, and `Opt` (like `Predictor.save_optimized_model`) writes them (loader/naive_buffer*.py).

Entry points: `CxxConfig`, `MobileConfig`, `create_paddle_predictor`, `Opt`, `get_version`. The public-API floor
above the predictor: imports the predictor and the loader, never the applications (commands, validation, cli, batch,
conformance).
"""
from __future__ import annotations

import enum

from nnadapter_bridge import __version__
from nnadapter_bridge.errors import ConfigError, NotSupportedError
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.predictor.config import Config, _as_bytes, check_nnadapter_device_name
from nnadapter_bridge.predictor.predictor import Predictor, create_predictor
from nnadapter_bridge.predictor.tensor import DataLayoutType, Place, PowerMode, PrecisionType, TargetType, Tensor

__all__ = ["CxxConfig", "MobileConfig", "create_paddle_predictor", "Place", "TargetType", "PrecisionType",
           "DataLayoutType", "PowerMode", "CLPrecisionType", "CLTuneMode", "Tensor", "CxxPredictor",
           "LightPredictor", "check_nnadapter_device_name", "get_version", "Opt"]


def get_version() -> str:
    """nnadapter-bridge's version (what every predictor's get_version() answers)."""
    return __version__


class CLPrecisionType(enum.IntEnum):
    """Paddle Lite's OpenCL precision (only for set_opencl_precision, which is not supported here)."""

    CL_PRECISION_AUTO = 0
    CL_PRECISION_FP32 = 1
    CL_PRECISION_FP16 = 2


class CLTuneMode(enum.IntEnum):
    """Paddle Lite's OpenCL tuning mode (only for set_opencl_tune, which is not supported here)."""

    CL_TUNE_NONE = 0
    CL_TUNE_RAPID = 1
    CL_TUNE_NORMAL = 2
    CL_TUNE_EXHAUSTIVE = 3


def _no_target(target: str, name: str):
    """A Paddle Lite setting of a target this package has no backend for: raises NotSupportedError."""
    def method(self, *args, **kwargs):
        raise NotSupportedError(f"{name}: there is no {target} target here; nnadapter-bridge runs models on "
                                "NNAdapter devices (set_nnadapter_device_names) and on the host. Remove the call.")
    method.__name__ = name
    method.__doc__ = f"Paddle Lite's {target} setting: raises NotSupportedError (no {target} target here)."
    return method


class _LiteOnly:
    """The methods both of Paddle Lite's configs have that nnadapter_bridge.Config has no use for."""

    set_opencl_binary_path_name = _no_target("OpenCL", "set_opencl_binary_path_name")
    set_opencl_precision = _no_target("OpenCL", "set_opencl_precision")
    set_opencl_tune = _no_target("OpenCL", "set_opencl_tune")
    set_metal_lib_path = _no_target("Metal", "set_metal_lib_path")
    set_metal_use_memory_reuse = _no_target("Metal", "set_metal_use_memory_reuse")
    set_metal_use_mps = _no_target("Metal", "set_metal_use_mps")


class CxxConfig(_LiteOnly, Config):
    """Paddle Lite's CxxConfig (full API: model dir/files, valid places, NNAdapter settings)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._discarded_passes: list = []

    def add_discarded_pass(self, pass_name: str) -> None:
        """Paddle Lite: do not run optimizer pass `pass_name`. None of Paddle Lite's optimizer passes run here
        (the model runs as written; only builtin_device fuses conv + batch norm / activation inside its
        programs), so a discarded pass is simply never run; the names are kept (discarded_passes())."""
        if not isinstance(pass_name, str) or not pass_name.strip():
            raise ConfigError(f"add_discarded_pass: expected a pass name, got {pass_name!r}")
        self._discarded_passes.append(pass_name.strip())

    def discarded_passes(self) -> list:
        return list(self._discarded_passes)

    def set_passes_internal(self, passes) -> None:
        """Paddle Lite's internal list of optimizer passes to run: raises NotSupportedError, as none of Paddle
        Lite's passes exist here (asking for some would be silently unmet)."""
        raise NotSupportedError(f"set_passes_internal({list(passes) if not isinstance(passes, str) else passes!r}): "
                                "Paddle Lite's optimizer passes do not exist in nnadapter-bridge (the model runs "
                                "as written, subgraphs on the NNAdapter devices); remove the call")


class MobileConfig(_LiteOnly, Config):
    """Paddle Lite's MobileConfig (light API)."""

    def set_model_buffer(self, model_buffer, *args) -> None:
        """set_model_buffer(model, params) as Config, or Paddle Lite's older MobileConfig form
        set_model_buffer(model, model_size, params, params_size): the first `size` bytes of each."""
        if len(args) == 3:
            model_size, params_buffer, params_size = args
            for what, size in (("model_size", model_size), ("params_size", params_size)):
                if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    raise ConfigError(f"set_model_buffer: {what} must be an int >= 0, got {size!r}")
            model = _as_bytes(model_buffer, "set_model_buffer (model)")
            params = _as_bytes(params_buffer, "set_model_buffer (params)")
            if model_size > len(model) or params_size > len(params):
                raise ConfigError(f"set_model_buffer: sizes {model_size}/{params_size} exceed the buffers "
                                  f"({len(model)}/{len(params)} bytes)")
            return Config.set_model_buffer(self, model[:model_size], params[:params_size])
        if len(args) > 1:
            raise ConfigError("set_model_buffer: give (model, params) or (model, model_size, params, params_size)")
        return Config.set_model_buffer(self, model_buffer, *args)


CxxPredictor = Predictor
LightPredictor = Predictor


def create_paddle_predictor(config: Config) -> Predictor:
    """Paddle Lite's factory: a predictor for a CxxConfig or a MobileConfig."""
    return create_predictor(config)


class Opt:
    """Paddle Lite's `paddlelite.lite.Opt` (the Python face of paddle_lite_opt): writes a model as a Paddle Lite
    optimized model `<optimize_out>.nb` (meta_version 2) that Paddle Lite 2.13's MobileConfig and nnadapter-bridge
    load. The ops are written as the model holds them: Paddle Lite's optimizer passes do not exist here
    (loader/naive_buffer_writer.py). `nnadapter-bridge opt` is the command-line form."""

    WRITABLE_TARGETS = ("x86", "arm", "host")

    def __init__(self):
        self._model_dir = None
        self._model_file = None
        self._param_file = None
        self._optimize_out = None
        self._valid_places = "x86"

    def set_model_dir(self, model_dir: str) -> None:
        self._model_dir = str(model_dir)

    def set_model_file(self, model_file: str) -> None:
        self._model_file = str(model_file)

    def set_param_file(self, param_file: str) -> None:
        self._param_file = str(param_file)

    def set_optimize_out(self, optimize_out: str) -> None:
        """The output path without its suffix: run() writes `<optimize_out>.nb`, as Paddle Lite's opt does."""
        self._optimize_out = str(optimize_out)

    def set_valid_places(self, valid_places: str) -> None:
        """Paddle Lite's comma-separated targets. x86, arm and host give the same file here; targets whose
        kernels need opt's rewrites (opencl, nnadapter, xpu, ...) raise NotSupportedError."""
        targets = [t.strip().lower() for t in str(valid_places).split(",") if t.strip()]
        bad = [t for t in targets if t not in self.WRITABLE_TARGETS]
        if not targets or bad:
            raise NotSupportedError(f"set_valid_places({valid_places!r}): nnadapter-bridge writes .nb files for "
                                    f"{', '.join(self.WRITABLE_TARGETS)}; NNAdapter devices are chosen by the "
                                    "predictor's config (set_nnadapter_device_names)")
        self._valid_places = ",".join(targets)

    def set_model_type(self, model_type: str) -> None:
        """"naive_buffer" (the default, the `.nb` file) only: Paddle Lite's "protobuf" output is the optimized
        program as a model dir, and no optimized program exists here."""
        if model_type != "naive_buffer":
            raise NotSupportedError(f"set_model_type({model_type!r}): only 'naive_buffer' (.nb) is written; the "
                                    "protobuf model you have is already what runs here")

    def set_quant_model(self, quant: bool) -> None:
        if quant:
            raise NotSupportedError("set_quant_model(True): Paddle Lite's weight quantization pass does not "
                                    "exist here; quantize with Paddle (docs/quantization.md)")

    def set_quant_type(self, quant_type) -> None:
        raise NotSupportedError("set_quant_type: Paddle Lite's weight quantization pass does not exist here")

    def set_passes_internal(self, passes) -> None:
        raise NotSupportedError("set_passes_internal: Paddle Lite's optimizer passes do not exist here")

    def record_model_info(self, record: bool) -> None:
        """Paddle Lite writes op/kernel lists for tailoring its library; nothing here uses them."""
        if record:
            raise NotSupportedError("record_model_info(True): there is no library to tailor here")

    def run(self) -> str:
        """Load the model and write `<optimize_out>.nb`; returns that path."""
        # Imported here: the .nb writer (and flatbuffers) serves Opt only, not a predictor's start.
        from nnadapter_bridge.loader.naive_buffer_writer import save

        if self._optimize_out is None:
            raise ConfigError("Opt.run: call set_optimize_out(path) first")
        if self._model_file is not None:
            graph = load_model(self._model_file, self._param_file)
        elif self._model_dir is not None:
            graph = load_model(self._model_dir, self._param_file)
        else:
            raise ConfigError("Opt.run: call set_model_dir(dir) or set_model_file(f) (+ set_param_file(p)) first")
        path = self._optimize_out + ".nb"
        save(graph, path)
        return path

    def run_optimize(self, model_dir: str, model_file: str, param_file: str, model_type: str, valid_places: str,
                     optimize_out: str) -> str:
        """Paddle Lite's one-call form: the settings, then run()."""
        if model_dir:
            self.set_model_dir(model_dir)
        if model_file:
            self.set_model_file(model_file)
        if param_file:
            self.set_param_file(param_file)
        self.set_model_type(model_type or "naive_buffer")
        self.set_valid_places(valid_places or "x86")
        self.set_optimize_out(optimize_out)
        return self.run()
