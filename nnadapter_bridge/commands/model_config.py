"""The Config a command builds from its model, device and partition options (paths checked first), and the
predictor it opens from it: a device the user named that cannot open is an error (exit 3), not a silent run
on the host.

Entry points: `build_config`, `open_predictor`, `check_model_path`, `check_partition_config_path`. Imports the
channel and the options; the predictor only inside the functions that build one.
"""
from __future__ import annotations

import os

from nnadapter_bridge.commands.channel import current, raise_for_device_fallbacks
from nnadapter_bridge.commands.options import CliError, check_file, check_min_subgraph_size, check_seed, device_names


def check_model_path(args) -> None:
    if not os.path.exists(args.model):
        raise CliError(f"{args.model}: no such model file or directory")
    if args.params and not os.path.exists(args.params):
        raise CliError(f"--params {args.params}: no such file or directory")


def check_partition_config_path(args) -> None:
    path = getattr(args, "partition_config", None)
    if path:
        check_file(path, f"--partition-config {path}")


def build_config(args, *, cache_dir: str | None = None, dynamic_shape_info: dict | None = None):
    """A Config from the model, device and partition options in `args` (checks paths first)."""
    # Imported on call, as create_predictor below: a command that opens no model (`devices`, `--help`) starts
    # without the predictor floor.
    from nnadapter_bridge.predictor.config import Config

    check_model_path(args)
    check_partition_config_path(args)
    check_min_subgraph_size(args)
    check_seed(args)
    config = Config()
    if os.path.isdir(args.model):
        config.set_model_dir(args.model)
        if args.params:
            config.set_param_file(args.params)
    else:
        config.set_model_file(args.model)
        if args.params:
            config.set_param_file(args.params)
    config.set_nnadapter_device_names(device_names(args))
    if args.context_properties:
        config.set_nnadapter_context_properties(args.context_properties)
    if getattr(args, "device_selection", None):
        config.set_nnadapter_device_selection(args.device_selection)
    if getattr(args, "execution_preference", None):
        config.set_nnadapter_execution_preference(args.execution_preference)
    if getattr(args, "relax_float32", False):
        config.set_nnadapter_relax_float32_to_float16(True)
    if cache_dir:
        config.set_nnadapter_model_cache_dir(cache_dir)
    if getattr(args, "partition_config", None):
        config.set_nnadapter_subgraph_partition_config_path(args.partition_config)
    config.set_min_subgraph_size(getattr(args, "min_subgraph_size", 1))
    config.set_strict(getattr(args, "strict", False))
    if dynamic_shape_info:
        config.set_nnadapter_dynamic_shape_info(dynamic_shape_info)
    return config


def open_predictor(config):
    """create_predictor(config), but a device that fell back while the predictor opened (cannot load, open or
    create a context) is a channel.DeviceError naming it: the user asked for that device."""
    from nnadapter_bridge.predictor.predictor import create_predictor

    since = len(current().warnings)
    predictor = create_predictor(config)
    try:
        raise_for_device_fallbacks(since)
    except BaseException:
        predictor.close()
        raise
    return predictor
