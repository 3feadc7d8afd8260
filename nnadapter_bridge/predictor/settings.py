"""A predictor's settings, resolved once: what a `Config` asks for, with the drivers and the environment read.

`Config` records what the user set (Paddle Lite's setters and their checks of the value itself); create_predictor
turns it, once, into a frozen `PredictorSettings` (`resolve_settings`), which the predictor, the partition plan and
the subgraph engines read from then on. Resolving is where what needs the drivers or the environment is decided:

  - the devices used: the listed ones (default builtin_device), none when Config.set_valid_places names no
    TargetType.NNAdapter place (a NoEffectWarning when names were set; an error in strict mode);
  - the context properties the devices get: set_nnadapter_context_properties's string, plus, after set_threads(n),
    `KEY=n` for the thread-count key of each device (its one declared property key ending in _NUM_THREADS) that
    neither that string nor the environment sets (`context_properties_with_threads`);
  - the model cache: dir, buffers, and the integrity key (Config.set_nnadapter_model_cache_key, else
    NNADAPTER_BRIDGE_CACHE_KEY from the environment; docs/cache.md);
  - the partition config (the API buffer, the API path, then the SUBGRAPH_PARTITION_CONFIG_FILE / _BUFFER
    environment) and the mixed-precision quantization config, parsed;
  - NNADAPTER_BRIDGE_PROGRESS (progress bars while subgraphs convert);
  - the execution preference and the relaxed float path (Config.set_nnadapter_execution_preference,
    set_nnadapter_relax_float32_to_float16): the properties each driver maps them to (its optional
    `preference_properties` hook; "low_power" also sets each thread-count key to 1), added where neither the
    string, set_threads nor the environment sets the key (`context_properties_with_preference`);
  - the device selection (Config.set_nnadapter_device_selection, else the context property
    NNADAPTER_DEVICE_SELECTION, which is taken out of the string the devices get; default "priority").

Entry point: `resolve_settings(config)`. Imports the ground (the runtime's DeviceManager, properties, nnc),
partition's config parser and the subgraph floor's mixed-precision parser; never the predictor module or anything
above the predictor floor.
"""
from __future__ import annotations

import os
import types
import warnings
from collections.abc import Callable, Iterable, Mapping

from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.nnadapter.nnc import resolve_cache_key
from nnadapter_bridge.nnadapter.properties import parse_properties
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.predictor.config import Config, NoEffectWarning
from nnadapter_bridge.subgraph.mixed_precision import listed_op_indices, resolve_mixed_precision_config
from nnadapter_bridge.subgraph.progress import ENV_PROGRESS
from partition import PartitionConfig, resolve_partition_config

# A driver's thread-count property is the key of its `property_keys` ending in this (Config.set_threads).
NUM_THREADS_SUFFIX = "_NUM_THREADS"


@plain_dataclass(frozen=True)
class PredictorSettings:
    """What a predictor, its partition plan and its engines read (module docstring); never changed once made."""

    model_source: Mapping[str, object]  # keyword arguments of loader.load_model
    device_names: tuple  # the devices to open, in order of preference; () when no NNAdapter place is valid
    listed_device_names: tuple  # the names set (or the default), whether or not they are used
    nnadapter_enabled: bool  # Config.nnadapter_enabled: a valid NNAdapter place (or none set)
    user_context_properties: str  # set_nnadapter_context_properties's string, as given
    context_properties: str  # what the devices get: the string plus set_threads' keys
    context_callback: Callable | None
    strict: bool
    host_threads: int  # set_threads' cap on the host executor's BLAS pool; 0: not capped
    cache_dir: str
    cache_buffers: Mapping[str, bytes]  # token -> .nnc image (each used once, by the predictor's CacheBufferStore)
    cache_key: bytes | None  # the integrity key (Config's, else the environment's); None: CRC only
    paddle_lite_cache_token: bool
    dynamic_shape_info: Mapping[str, tuple]  # input name -> the shapes it takes (tuples of ints)
    partition_config: PartitionConfig | None
    min_subgraph_size: int
    mixed_precision_config: PartitionConfig | None
    show_progress: bool  # Config's and NNADAPTER_BRIDGE_PROGRESS's (not 0) say yes (a bar is drawn on a terminal only)
    device_selection: str = "priority"  # subgraph.device_selection.POLICIES
    relax_float32: bool = False  # Config.set_nnadapter_relax_float32_to_float16 (the estimate uses relaxed figures)

    def float_op_indices(self, graph) -> frozenset:
        """The block-0 indices of the ops the mixed-precision config lists; empty without one. A spec that matches
        no op is warned about (partition.PartitionConfigWarning)."""
        return listed_op_indices(self.mixed_precision_config, graph)


def num_threads_property(device_name: str) -> str | None:
    """The context-property key that sets the thread count of the driver `device_name` (its one declared key
    ending in _NUM_THREADS), or None when it declares none (or does not load)."""
    keys = DeviceManager.instance().property_keys(device_name) or ()
    found = sorted(k for k in keys if k.endswith(NUM_THREADS_SUFFIX))
    return found[0] if len(found) == 1 else None


def context_properties_with_threads(properties: str, threads: int | None, device_names: Iterable[str],
                                    environ: Mapping[str, str] = os.environ) -> str:
    """`properties` plus `KEY=threads;` for the thread-count key of each of `device_names` that neither
    `properties` nor `environ` sets; `properties` unchanged when `threads` is None (set_threads never called)."""
    if threads is None:
        return properties
    given = parse_properties(properties)
    added: list = []
    for name in device_names:
        key = num_threads_property(name)
        if key and key not in given and key not in environ and key not in added:
            added.append(key)
    if not added:
        return properties
    sep = "" if not properties.strip() or properties.rstrip().endswith(";") else ";"
    return properties + sep + "".join(f"{key}={threads};" for key in added)


DEVICE_SELECTION_PROPERTY = "NNADAPTER_DEVICE_SELECTION"


def _preference_hook(name: str):
    try:
        return getattr(DeviceManager.instance().driver(name), "preference_properties", None)
    except Exception:  # a driver that does not load maps nothing (its device is left out at open, with a warning)
        return None


def _hook_properties(hook, preference: str, relax: bool) -> dict:
    try:
        return {str(k): str(v) for k, v in (hook(preference, relax) or {}).items()}
    except Exception as exc:  # a failing hook maps nothing: the device keeps its defaults, and says so
        warnings.warn(f"{getattr(hook, '__self__', hook)!r}: preference_properties failed ({exc}); its defaults "
                      "stay", NoEffectWarning, stacklevel=4)
        return {}


def context_properties_with_preference(properties: str, preference: str, relax_float32: bool,
                                       device_names: Iterable[str], environ: Mapping[str, str] = os.environ) -> str:
    """`properties` plus the keys each of `device_names` maps the execution preference and the relaxed float path
    to (module docstring), for keys neither `properties` nor `environ` sets; unchanged when neither is asked for. A
    relaxed float path no listed device offers is one NoEffectWarning."""
    if not preference and not relax_float32:
        return properties
    given = parse_properties(properties)
    added: dict = {}
    relaxed = False
    for name in device_names:
        hook = _preference_hook(name)
        found = _hook_properties(hook, preference, relax_float32) if hook is not None else {}
        if relax_float32 and hook is not None:
            relaxed = relaxed or bool(set(found.items()) - set(_hook_properties(hook, preference, False).items()))
        key = num_threads_property(name) if preference == "low_power" else None
        if key:
            found.setdefault(key, "1")  # low power: one core busy per device
        for key, value in found.items():
            if key not in given and key not in environ and key not in added:
                added[key] = value
    if relax_float32 and not relaxed:
        warnings.warn(f"set_nnadapter_relax_float32_to_float16: none of {', '.join(device_names) or 'the devices'} "
                      "computes float32 in a relaxed precision, so everything stays float32", NoEffectWarning,
                      stacklevel=4)
    if not added:
        return properties
    sep = "" if not properties.strip() or properties.rstrip().endswith(";") else ";"
    return properties + sep + "".join(f"{key}={value};" for key, value in added.items())


def device_selection(chosen: str, properties: str) -> tuple:
    """(policy, properties without the NNADAPTER_DEVICE_SELECTION entry): Config's choice wins over the property;
    no device reads the property, so the devices never get it (and no UnknownPropertyWarning names it)."""
    given = parse_properties(properties)
    if DEVICE_SELECTION_PROPERTY not in given:
        return chosen or "priority", properties  # the default (device_selection.DEFAULT_POLICY), imported not
    from nnadapter_bridge.subgraph.device_selection import POLICIES  # a warm start loads it only for a policy

    value = given[DEVICE_SELECTION_PROPERTY].strip().lower()
    if not chosen and value not in POLICIES:
        raise ConfigError(f"context property {DEVICE_SELECTION_PROPERTY}={given[DEVICE_SELECTION_PROPERTY]}: expected "
                          f"one of {', '.join(POLICIES)}")
    rest = "".join(f"{k}={v};" for k, v in given.items() if k != DEVICE_SELECTION_PROPERTY)
    return chosen or value, rest


def _used_device_names(listed: list, names_given: bool, enabled: bool, valid_places: list, strict: bool) -> tuple:
    """The devices a predictor uses: the `listed` ones, or none when the valid places name no NNAdapter place
    (Config.set_valid_places); then device names that were set get one NoEffectWarning."""
    if enabled:
        return tuple(listed)
    places = [p.target.name for p in valid_places]
    if strict:
        raise ConfigError(f"set_strict() asks for every op on an NNAdapter device, but set_valid_places {places} "
                          "has no TargetType.NNAdapter place, so no device runs; add Place(TargetType.NNAdapter) "
                          "or drop set_strict()")
    if names_given:
        warnings.warn(f"set_nnadapter_device_names({listed}) is unused: set_valid_places {places} has no "
                      "TargetType.NNAdapter place, so the whole model runs on the host (as Paddle Lite uses no "
                      "NNAdapter kernel then); add Place(TargetType.NNAdapter) to run on the devices",
                      NoEffectWarning, stacklevel=5)
    return ()


def resolve_settings(config: Config) -> PredictorSettings:
    """The settings `config` asks for (module docstring); ConfigError for what only now shows to be wrong (no
    model set, a mixed-precision config path that does not exist, strict mode without an NNAdapter place)."""
    if not isinstance(config, Config):
        raise ConfigError(f"create_predictor: expected a nnadapter_bridge.Config, got {type(config).__name__}")
    # What the user set, read in one go (the getters return copies); resolved below.
    model_source = config.model_source()
    listed = config.nnadapter_device_names()
    names_given = config.nnadapter_device_names_given()
    enabled = config.nnadapter_enabled()
    valid_places = config.valid_places()
    strict = bool(config.strict)
    threads = config.threads() if config.threads_set() else None
    user_properties = config.nnadapter_context_properties()
    callback = config.nnadapter_context_callback()
    cache_dir = config.nnadapter_model_cache_dir()
    cache_buffers = config.nnadapter_model_cache_buffers()
    cache_key = config.nnadapter_model_cache_key()
    dynamic_shape_info = config.nnadapter_dynamic_shape_info()
    partition_buffer = config.nnadapter_subgraph_partition_config_buffer()
    partition_path = config.nnadapter_subgraph_partition_config_path()
    mixed_buffer = config.nnadapter_mixed_precision_quantization_config_buffer()
    mixed_path = config.nnadapter_mixed_precision_quantization_config_path()

    device_names = _used_device_names(listed, names_given, enabled, valid_places, strict)
    selection, user_properties = device_selection(config.nnadapter_device_selection(), user_properties)
    return PredictorSettings(
        model_source=types.MappingProxyType(model_source),
        device_names=device_names,
        listed_device_names=tuple(listed),
        nnadapter_enabled=enabled,
        user_context_properties=user_properties,
        context_properties=context_properties_with_preference(
            context_properties_with_threads(user_properties, threads, device_names),
            config.nnadapter_execution_preference(), config.nnadapter_relax_float32_to_float16(), device_names),
        context_callback=callback,
        strict=strict,
        host_threads=threads or 0,
        cache_dir=cache_dir,
        cache_buffers=types.MappingProxyType(cache_buffers),
        cache_key=resolve_cache_key(cache_key),
        paddle_lite_cache_token=bool(config.paddle_lite_cache_token),
        dynamic_shape_info=types.MappingProxyType({name: tuple(tuple(shape) for shape in shapes)
                                                   for name, shapes in dynamic_shape_info.items()}),
        partition_config=resolve_partition_config(partition_buffer or None, partition_path or None, os.environ),
        min_subgraph_size=config.min_subgraph_size,
        mixed_precision_config=resolve_mixed_precision_config(mixed_buffer, mixed_path),
        show_progress=bool(config.show_progress) and os.environ.get(ENV_PROGRESS, "1").strip() != "0",
        device_selection=selection,
        relax_float32=config.nnadapter_relax_float32_to_float16(),
    )
