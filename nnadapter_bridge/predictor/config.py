"""The predictor configuration: where the model is, which NNAdapter devices to use, and how to cache.

`Config` keeps Paddle Lite's method names (CxxConfig and MobileConfig merged, facts §8) so scripts port
unchanged. It records what the user set: setters validate what they can without loading anything (types,
token format, dynamic shape ranks); what needs the model, the drivers or the environment (device names and
their thread-count keys, input names, the cache key's fallback) is resolved and checked by create_predictor
(predictor.settings). Config loads no driver.

`check_nnadapter_device_name(name)` answers whether a driver of that name can be acquired here.

Entry points: `Config`, `check_nnadapter_device_name`, `NoEffectWarning`. Imports `errors` and the standard's codes;
the runtime, the settings and the tensor module only inside the methods that need them, so a Config loads no driver;
never the predictor module.
"""
from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping

from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.nnadapter.codes import MAX_SIZE_OF_DIMENSIONS, MAX_SIZE_OF_DYNAMIC_DIMENSIONS

DEFAULT_DEVICE_NAMES = ("builtin_device",)
_TOKEN_PATTERN = re.compile(r"[0-9a-fA-F]{32}")
_WARNED_ONCE: set = set()


class NoEffectWarning(UserWarning):
    """A Paddle Lite setting that changes nothing here (set_power_mode on x86; device names that no valid
    NNAdapter place lets run): said once instead of silently ignored."""


def _warn_once(key: str, message: str, stacklevel: int = 3) -> None:
    if key not in _WARNED_ONCE:
        _WARNED_ONCE.add(key)
        warnings.warn(message, NoEffectWarning, stacklevel=stacklevel)


def check_nnadapter_device_name(name: str) -> bool:
    """True when an NNAdapter device called `name` can be acquired (its driver is installed and opens)."""
    # Imported on call: `import nnadapter_bridge; nnadapter_bridge.Config` does not load the runtime (start-up).
    from nnadapter_bridge.nnadapter.runtime import check_device_name

    if not isinstance(name, str) or not name:
        return False
    return check_device_name(name)


def _as_bytes(data, what: str) -> bytes:
    """bytes from bytes-like data or Paddle Lite's Python list of chars / small ints."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, (list, tuple)):
        try:
            return bytes((ord(c) if isinstance(c, str) else int(c)) & 0xFF for c in data)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{what}: expected bytes or a list of chars/ints, got an element that is "
                              f"neither ({exc})") from exc
    raise ConfigError(f"{what}: expected bytes, got {type(data).__name__}")


def _path(value, what: str) -> str:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ConfigError(f"{what}: expected a non-empty path, got {value!r}")
    return os.fspath(value)


class Config:
    """What create_predictor needs: the model, the NNAdapter settings, and the partitioning options."""

    def __init__(self, model_dir: str | None = None):
        self._model_dir: str | None = None
        self._model_file: str | None = None
        self._param_file: str | None = None
        self._model_buffer: bytes | None = None
        self._params_buffer: bytes | None = None
        self._device_names: list[str] = []
        self._context_properties = ""
        self._context_callback: Callable | None = None
        self._model_cache_dir = ""
        self._model_cache_buffers: dict[str, bytes] = {}
        self._model_cache_key: bytes | None = None
        self._partition_config_path = ""
        self._partition_config_buffer = ""
        self._mixed_precision_config_path = ""
        self._mixed_precision_config_buffer = ""
        self._dynamic_shape_info: dict[str, list[list[int]]] = {}
        self._threads = 1
        self._threads_set = False  # set_threads called: the devices and the host get the count (set_threads)
        self._power_mode = 3  # Paddle Lite's default, LITE_POWER_NO_BIND
        self._valid_places: list | None = None  # None: set_valid_places never called (devices used)
        self.min_subgraph_size = 1
        self.strict = False
        # Use Paddle Lite's plain cache token (no subgraph fingerprint): lets a .nnc made by Paddle Lite
        # be found, at the price of Lite's stale-hit risk (the token ignores weights and properties).
        self.paddle_lite_cache_token = False
        # A progress bar on a terminal while subgraphs convert (NNADAPTER_BRIDGE_PROGRESS=0 also turns it off).
        self.show_progress = True
        self._device_selection = ""  # "": not set (the context property, else "priority")
        self._execution_preference = ""  # "": none (each driver's defaults)
        self._relax_float32 = False
        if model_dir is not None:
            self.set_model_dir(model_dir)

    # -- the model -----------------------------------------------------------------------------------
    def set_model_dir(self, model_dir) -> None:
        """A directory: __model__ + per-var files, __model__ + __params__, one .pdmodel + .pdiparams, or
        Paddle 3's one <name>.json (PIR) + <name>.pdiparams."""
        self._model_dir = _path(model_dir, "set_model_dir")

    def model_dir(self) -> str:
        return self._model_dir or ""

    def set_model_file(self, model_file) -> None:
        """A combined model file (`__model__`, `*.pdmodel`, or a Paddle 3 PIR `*.json`); pair it with
        set_param_file (default: the .pdiparams beside a .pdmodel / .json)."""
        self._model_file = _path(model_file, "set_model_file")

    def model_file(self) -> str:
        return self._model_file or ""

    def set_param_file(self, param_file) -> None:
        self._param_file = _path(param_file, "set_param_file")

    def param_file(self) -> str:
        return self._param_file or ""

    def set_model_buffer(self, model_buffer, params_buffer=None) -> None:
        """The model program and its combined params as bytes (Paddle Lite's CxxConfig.set_model_buffer)."""
        self._model_buffer = _as_bytes(model_buffer, "set_model_buffer (model)")
        if not self._model_buffer:
            raise ConfigError("set_model_buffer: the model buffer is empty")
        self._params_buffer = None if params_buffer is None else _as_bytes(params_buffer, "set_model_buffer (params)")

    def set_model_from_file(self, model_file) -> None:
        """MobileConfig's name: a Paddle Lite optimized model (`.nb`, what paddle_lite_opt / lite.Opt /
        save_optimized_model write), or any Paddle model file (a .pdmodel or PIR .json with its .pdiparams
        beside it), or a model directory."""
        path = _path(model_file, "set_model_from_file")
        if os.path.isdir(path):
            self._model_dir = path
        else:
            self._model_file = path

    def set_model_from_buffer(self, model_buffer, params_buffer=None) -> None:
        """MobileConfig's name for set_model_buffer: the bytes of a `.nb` (Paddle Lite's use, no params
        buffer: a `.nb` holds its parameters), or of a Paddle program with its params buffer."""
        self.set_model_buffer(model_buffer, params_buffer)

    def model_source(self) -> dict:
        """Keyword arguments for loader.load_model; ConfigError when no model was set."""
        if self._model_buffer is not None:
            if self._params_buffer is not None:
                return {"model_bytes": self._model_buffer, "params_bytes": self._params_buffer}
            return {"model_bytes": self._model_buffer, "params_path": self._param_file}
        if self._model_file is not None:
            params = self._param_file
            stem, suffix = os.path.splitext(self._model_file)
            if params is None and suffix in (".pdmodel", ".json"):
                sibling = stem + ".pdiparams"
                # A model without parameters has no .pdiparams: then the loader is given none.
                params = sibling if os.path.exists(sibling) else None
                if params is None:
                    return {"model_path": self._model_file}
            if params is None and self._model_dir is not None:
                return {"model_path": self._model_dir}
            return {"model_path": self._model_file, "params_path": params}
        if self._model_dir is not None:
            return {"model_path": self._model_dir}
        raise ConfigError("no model set: call set_model_dir(dir), set_model_file(f) + set_param_file(p), "
                          "or set_model_buffer(model_bytes, params_bytes) before create_predictor")

    # -- NNAdapter devices and context -----------------------------------------------------------------
    def set_nnadapter_device_names(self, device_names: Iterable[str]) -> None:
        """The devices to run subgraphs on, in order of preference (the first that supports an operation
        gets it when several are given). Names are checked against the installed drivers by
        create_predictor; `nnadapter-bridge devices` lists them."""
        if isinstance(device_names, str):
            raise ConfigError(f"set_nnadapter_device_names: expected a list of names, got the string "
                              f"{device_names!r}; write [{device_names!r}]")
        names = list(device_names)
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"set_nnadapter_device_names: {name!r} is not a device name")
        names = [n.strip() for n in names]
        if len(set(names)) != len(names):
            raise ConfigError(f"set_nnadapter_device_names: {names} names a device twice")
        self._device_names = names

    def nnadapter_device_names(self) -> list[str]:
        """The configured devices, or ["builtin_device"] when none were set."""
        return list(self._device_names) if self._device_names else list(DEFAULT_DEVICE_NAMES)

    def nnadapter_device_names_given(self) -> bool:
        """Whether set_nnadapter_device_names was called (else the default device is used)."""
        return bool(self._device_names)

    def set_nnadapter_context_properties(self, properties: str) -> None:
        """`KEY=value;KEY=value` handed to every device's context (and part of the cache token)."""
        if not isinstance(properties, str):
            raise ConfigError(f"set_nnadapter_context_properties: expected a string, got {type(properties).__name__}")
        self._context_properties = properties

    def nnadapter_context_properties(self) -> str:
        return self._context_properties

    def effective_context_properties(self, device_names: Iterable[str] | None = None) -> str:
        """The context properties the devices get: set_nnadapter_context_properties's string, plus, after
        set_threads(n), `KEY=n` for the thread-count key of each device that neither that string nor the
        environment sets. Without set_threads: the string unchanged. Asks the drivers for their keys, so it is
        resolved by predictor.settings (which create_predictor uses); this answers the same question for a caller."""
        if not self._threads_set:
            return self._context_properties
        # Imported on call: settings imports this module (it resolves a Config).
        from nnadapter_bridge.predictor.settings import context_properties_with_threads

        names = self.nnadapter_device_names() if device_names is None else device_names
        return context_properties_with_threads(self._context_properties, self._threads, names)

    def set_nnadapter_context_callback(self, callback: Callable | None) -> None:
        if callback is not None and not callable(callback):
            raise ConfigError("set_nnadapter_context_callback: expected a callable or None")
        self._context_callback = callback

    def nnadapter_context_callback(self) -> Callable | None:
        return self._context_callback

    # -- model cache ----------------------------------------------------------------------------------
    def set_nnadapter_model_cache_dir(self, cache_dir) -> None:
        """Where compiled programs are read from and written to, as `<dir>/<token>.nnc`."""
        self._model_cache_dir = _path(cache_dir, "set_nnadapter_model_cache_dir")

    def nnadapter_model_cache_dir(self) -> str:
        return self._model_cache_dir

    def set_nnadapter_model_cache_buffers(self, model_cache_token: str, model_cache_buffer) -> None:
        """A `.nnc` image in memory for one token (the file name without `.nnc`); used once, then dropped."""
        if not isinstance(model_cache_token, str) or not model_cache_token:
            raise ConfigError("set_nnadapter_model_cache_buffers: the token must be a non-empty string")
        if not _TOKEN_PATTERN.fullmatch(model_cache_token):
            raise ConfigError(f"set_nnadapter_model_cache_buffers: token {model_cache_token!r} is not 32 hex "
                              "characters; it is the name of the .nnc file without its extension")
        token = model_cache_token.lower()
        data = _as_bytes(model_cache_buffer, "set_nnadapter_model_cache_buffers")
        if not data:
            raise ConfigError(f"set_nnadapter_model_cache_buffers: the buffer for token {token} is empty")
        if token in self._model_cache_buffers:
            raise ConfigError(f"set_nnadapter_model_cache_buffers: token {token} was already set; "
                              "each token may be given once")
        self._model_cache_buffers[token] = data

    def nnadapter_model_cache_buffers(self) -> dict[str, bytes]:
        return dict(self._model_cache_buffers)

    def set_nnadapter_model_cache_key(self, key) -> None:
        """A secret (str or bytes) that signs and checks every model cache record (files and buffers) with
        HMAC-SHA256: a record without a valid MAC is a miss. None: NNADAPTER_BRIDGE_CACHE_KEY from the
        environment, if set (docs/cache.md)."""
        if key is None:
            self._model_cache_key = None
            return
        if isinstance(key, str):
            key = key.encode("utf-8")
        if not isinstance(key, (bytes, bytearray, memoryview)) or not len(key):
            raise ConfigError("set_nnadapter_model_cache_key: expected a non-empty str or bytes (or None)")
        self._model_cache_key = bytes(key)

    def nnadapter_model_cache_key(self) -> bytes | None:
        """The key given with set_nnadapter_model_cache_key (None: the environment's, if any, applies)."""
        return self._model_cache_key

    # -- partitioning and precision ----------------------------------------------------------------------
    def set_nnadapter_subgraph_partition_config_path(self, path) -> None:
        """A file of `op_type:inputs:outputs` lines naming ops to keep on the host (partition.config)."""
        self._partition_config_path = _path(path, "set_nnadapter_subgraph_partition_config_path")

    def nnadapter_subgraph_partition_config_path(self) -> str:
        return self._partition_config_path

    def set_nnadapter_subgraph_partition_config_buffer(self, text) -> None:
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"set_nnadapter_subgraph_partition_config_buffer: the buffer is not UTF-8 text "
                                  f"(byte {exc.start}: {bytes(text)[exc.start:exc.start + 1]!r}); a partition "
                                  f"config is lines of 'op_type:inputs:outputs'") from None
        if not isinstance(text, str):
            raise ConfigError("set_nnadapter_subgraph_partition_config_buffer: expected a string")
        self._partition_config_buffer = text

    def nnadapter_subgraph_partition_config_buffer(self) -> str:
        return self._partition_config_buffer

    def set_nnadapter_mixed_precision_quantization_config_path(self, path) -> None:
        """A file listing ops of a quantized model that compute in float (partition-config syntax; see
        nnadapter_bridge.subgraph.mixed_precision). The buffer, when set, wins."""
        self._mixed_precision_config_path = _path(path, "set_nnadapter_mixed_precision_quantization_config_path")

    def nnadapter_mixed_precision_quantization_config_path(self) -> str:
        return self._mixed_precision_config_path

    def set_nnadapter_mixed_precision_quantization_config_buffer(self, text) -> None:
        """The text of a mixed-precision quantization config (see the path setter)."""
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        if not isinstance(text, str):
            raise ConfigError("set_nnadapter_mixed_precision_quantization_config_buffer: expected a string")
        self._mixed_precision_config_buffer = text

    def nnadapter_mixed_precision_quantization_config_buffer(self) -> str:
        return self._mixed_precision_config_buffer

    # -- dynamic shapes ---------------------------------------------------------------------------------
    def set_nnadapter_dynamic_shape_info(self, info: Mapping[str, Iterable[Iterable[int]]]) -> None:
        """The shapes each input will take: {"x": [[1,3,224,224], [4,3,224,224]]}. A subgraph fed by `x`
        is then compiled once with the differing axes unknown and these shapes as its dynamic dims.
        At most 8 shapes per input, all of the same rank; -1 marks an axis of any size."""
        if not isinstance(info, Mapping):
            raise ConfigError("set_nnadapter_dynamic_shape_info: expected a dict {input name: [shape, ...]}")
        checked: dict[str, list[list[int]]] = {}
        for name, shapes in info.items():
            what = f"set_nnadapter_dynamic_shape_info['{name}']"
            if not isinstance(name, str) or not name:
                raise ConfigError(f"set_nnadapter_dynamic_shape_info: {name!r} is not an input name")
            try:
                shapes = [[int(d) for d in shape] for shape in shapes]
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{what}: expected a list of shapes (lists of ints), got {shapes!r}") from exc
            if not shapes:
                raise ConfigError(f"{what}: give at least one shape")
            if len(shapes) > MAX_SIZE_OF_DYNAMIC_DIMENSIONS:
                raise ConfigError(f"{what}: {len(shapes)} shapes given, NNAdapter allows at most "
                                  f"{MAX_SIZE_OF_DYNAMIC_DIMENSIONS}")
            ranks = {len(shape) for shape in shapes}
            if len(ranks) != 1:
                raise ConfigError(f"{what}: every shape of one input must have the same rank, got {shapes}")
            rank = ranks.pop()
            if not 1 <= rank <= MAX_SIZE_OF_DIMENSIONS:
                raise ConfigError(f"{what}: rank {rank} is outside 1..{MAX_SIZE_OF_DIMENSIONS}")
            for shape in shapes:
                if any(d == 0 or d < -1 for d in shape):
                    raise ConfigError(f"{what}: shape {shape} has a dim that is neither positive nor -1")
            checked[name] = shapes
        self._dynamic_shape_info = checked

    def nnadapter_dynamic_shape_info(self) -> dict[str, list[list[int]]]:
        return {name: [list(s) for s in shapes] for name, shapes in self._dynamic_shape_info.items()}

    # -- host-side knobs ----------------------------------------------------------------------------------
    def set_threads(self, threads: int) -> None:
        """The number of threads the devices and the host kernels use. Each listed device whose driver has a
        thread-count property (BUILTIN_DEVICE_NUM_THREADS, INTEL_OPENVINO_INFERENCE_NUM_THREADS,
        MICROSOFT_ONNXRUNTIME_NUM_THREADS: the key ending in _NUM_THREADS) gets `threads` unless
        set_nnadapter_context_properties or the environment sets that key (they win); the host executor's BLAS
        pool is capped at `threads` while a run executes. Never called: every library keeps its own default.
        (Paddle Lite's ARM build sizes its kernels' thread pool with it; its x86 build ignores it.)"""
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ConfigError(f"set_threads: expected a positive int, got {threads!r}")
        self._threads = threads
        self._threads_set = True

    def threads(self) -> int:
        """The count given to set_threads (1, Paddle Lite's default, when never called)."""
        return self._threads

    def threads_set(self) -> bool:
        """Whether set_threads was called (only then do the devices and the host get the count)."""
        return self._threads_set

    def set_power_mode(self, mode) -> None:
        """Paddle Lite's power mode binds its ARM kernels to big or little cores; on x86 Paddle Lite ignores it,
        and so does nnadapter-bridge (there is no core binding to do). A PowerMode (or its int) is kept and
        returned by power_mode(); a mode other than LITE_POWER_NO_BIND (the default) gets one NoEffectWarning
        per process saying it has no effect. Anything else is a ConfigError."""
        # The tensor module (PowerMode, Place, TargetType) is imported on call in this class: `nnadapter_bridge.Config`
        # alone does not load it (start-up time; benchmarks/profile_startup.py).
        from nnadapter_bridge.predictor.tensor import PowerMode, _enum_member
        mode = _enum_member(PowerMode, mode, "set_power_mode")
        if mode != PowerMode.LITE_POWER_NO_BIND:
            _warn_once("power_mode", f"set_power_mode({mode.name}) has no effect: power modes bind Paddle Lite's ARM "
                       "kernels to CPU cores; on x86 (Paddle Lite's x86 build too) threads are not bound. Use "
                       "set_threads for the thread count.")
        self._power_mode = int(mode)

    def power_mode(self):
        """The mode given to set_power_mode (LITE_POWER_NO_BIND by default, as in Paddle Lite)."""
        from nnadapter_bridge.predictor.tensor import PowerMode
        return PowerMode(self._power_mode)

    def set_valid_places(self, places) -> None:
        """Paddle Lite's valid places decide whether NNAdapter runs at all. With a Place(TargetType.NNAdapter,
        ...) in the list, the devices of set_nnadapter_device_names run the parts they support (the rest runs
        on the host). Without one, nothing runs on an NNAdapter device: the whole model runs on the host
        executor, and device names that were set get one NoEffectWarning at create_predictor (Paddle Lite
        then picks no NNAdapter kernel). The other targets (X86, Host, ARM, Any, ...) all mean "the host" here.
        Never called: the devices are used (Paddle Lite's CxxConfig insists on valid places; a MobileConfig's
        .nb carries them). A non-empty list of Place objects; a string (the 'x86,arm' form of Opt), an empty
        list or anything else is a ConfigError."""
        from nnadapter_bridge.predictor.tensor import Place
        if isinstance(places, (str, bytes)):
            raise ConfigError(f"set_valid_places: expected a list of Place objects, got the string {places!r}; "
                              "write e.g. [Place(TargetType.NNAdapter, PrecisionType.FP32), "
                              "Place(TargetType.X86, PrecisionType.FP32)] (strings like 'x86,arm' are "
                              "Opt.set_valid_places's form)")
        if isinstance(places, Place):
            places = [places]
        try:
            places = list(places)
        except TypeError:
            raise ConfigError(f"set_valid_places: expected a list of Place objects, got {places!r}") from None
        if not places:
            raise ConfigError("set_valid_places: the list is empty; give at least one Place (Paddle Lite: 'At "
                              "least one valid_place should be set')")
        for k, place in enumerate(places):
            if not isinstance(place, Place):
                hint = " (strings are Opt.set_valid_places's form)" if isinstance(place, str) else ""
                raise ConfigError(f"set_valid_places: element {k} is {place!r}, not a Place{hint}; write "
                                  "Place(TargetType.X86, PrecisionType.FP32) and the like")
            if not place.is_valid():
                raise ConfigError(f"set_valid_places: element {k} {place} is not a valid place (its target, "
                                  "precision or layout is Unk)")
        self._valid_places = places

    def valid_places(self) -> list:
        """The places given to set_valid_places ([] when never called)."""
        return list(self._valid_places or [])

    def nnadapter_enabled(self) -> bool:
        """Whether the NNAdapter devices may run: set_valid_places never called, or a Place with
        TargetType.NNAdapter among the valid places (set_valid_places)."""
        from nnadapter_bridge.predictor.tensor import TargetType
        if self._valid_places is None:
            return True
        return any(place.target == TargetType.NNAdapter for place in self._valid_places)

    def is_model_from_memory(self) -> bool:
        """Paddle Lite's name: whether the model was given as bytes (set_model_buffer / set_model_from_buffer)."""
        try:
            source = self.model_source()
        except ConfigError:
            return False
        return any(key.endswith(("_bytes", "_buffer")) for key in source)

    def set_min_subgraph_size(self, size: int) -> None:
        """Clusters with fewer ops stay on the host (Paddle Lite's NNAdapter uses 1)."""
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"set_min_subgraph_size: expected an int >= 1, got {size!r}")
        self.min_subgraph_size = size

    def set_strict(self, strict: bool = True) -> None:
        """Strict: an op no selected device supports is an error (listing all of them) instead of running
        on the host."""
        self.strict = bool(strict)

    def set_show_progress(self, enabled: bool = True) -> None:
        """Whether converting the subgraphs draws a progress bar when stderr is a terminal (the default; the
        environment's NNADAPTER_BRIDGE_PROGRESS=0 turns it off for the whole process). A program running many
        predictors with a display of its own (batch) turns it off here."""
        self.show_progress = bool(enabled)

    def set_nnadapter_device_selection(self, policy: str) -> None:
        """How the listed devices share a model: "priority" (the default, Paddle Lite's: each op goes to the first
        listed device that takes it), "fastest" (each subgraph runs with the order of the devices whose estimated
        time, from this machine's calibration, is lowest, counting the copies a split adds; close estimates are timed
        on the first run) or "low_power" (time x power where the devices report power, else as "fastest"). Also the
        context property NNADAPTER_DEVICE_SELECTION; this setter wins. docs/device_selection.md tells more."""
        from nnadapter_bridge.subgraph.device_selection import POLICIES

        if not isinstance(policy, str) or policy.strip().lower() not in POLICIES:
            raise ConfigError(f"set_nnadapter_device_selection: expected one of {', '.join(POLICIES)}, got {policy!r}")
        self._device_selection = policy.strip().lower()

    def set_nnadapter_execution_preference(self, preference: str) -> None:
        """NNAPI's execution preference: "low_power" (one thread per device), "fast_single_answer" (intel_openvino:
        one stream) or "sustained_speed" (intel_openvino: a stream per core, for clones running at once); each
        device gets the context properties its driver maps it to, unless the context properties or the environment
        set those keys. Part of the cache token (through the properties)."""
        from nnadapter_bridge.nnadapter.driver_protocol import EXECUTION_PREFERENCES

        if not isinstance(preference, str) or preference.strip().lower() not in EXECUTION_PREFERENCES:
            raise ConfigError(f"set_nnadapter_execution_preference: expected one of "
                              f"{', '.join(EXECUTION_PREFERENCES)}, got {preference!r}")
        self._execution_preference = preference.strip().lower()

    def nnadapter_execution_preference(self) -> str:
        return self._execution_preference

    def set_nnadapter_relax_float32_to_float16(self, enabled: bool = True) -> None:
        """NNAPI's relaxComputationFloat32toFloat16: the devices may compute float32 operations in float16 (or in
        bfloat16 where they compute that instead: intel_openvino on a CPU with bf16). Each device gets the context
        property its driver maps it to, unless set already; a device without one computes float32 as before (a
        NoEffectWarning when no listed device has one). Part of the cache token; `run --compare-paddle` judges
        such outputs at the reduced-precision tolerance and shows what it cost."""
        self._relax_float32 = bool(enabled)

    def nnadapter_relax_float32_to_float16(self) -> bool:
        return self._relax_float32

    def nnadapter_device_selection(self) -> str:
        """The policy set with set_nnadapter_device_selection, '' when not set."""
        return self._device_selection

    def set_paddle_lite_cache_token(self, enabled: bool = True) -> None:
        """Name caches with Paddle Lite's plain token (see engine): finds .nnc files Paddle Lite wrote, but
        a changed weight or context property is then NOT noticed."""
        self.paddle_lite_cache_token = bool(enabled)

    def __repr__(self) -> str:
        try:
            source = self.model_source()
        except ConfigError:
            source = {}
        where = {k: (f"<{len(v)} bytes>" if isinstance(v, bytes) else v) for k, v in source.items()}
        return f"Config(model={where}, devices={self.nnadapter_device_names()})"
