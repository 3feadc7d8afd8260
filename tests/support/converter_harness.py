"""Converter tests end to end: a Paddle program -> our loader -> converters -> builtin_device, compared
with what Paddle itself computes for the same saved program.

Two ways to make the program:
- `static_program(tmp_path, build, feeds)`: `build(**inputs)` runs under paddle's legacy static mode
  (FLAGS_enable_pir_api=0, set in conftest) and returns the output var(s); the program is saved with
  `paddle.static.save_inference_model` and the reference comes from Paddle running the SAVED program.
- `opdesc_program(tmp_path, op_type, inputs=..., outputs=..., attrs=..., feeds=..., params=...)`: for ops
  paddle 3.3.1 cannot build in legacy static mode, the OpDesc is written with our own proto module
  (`devtools.zoo.write_program`). The reference comes from Paddle executing that program when it
  can; otherwise the test passes its own oracle (a paddle dygraph call).

`convert_and_run(model_path, feeds)` converts every op of block 0 (feed/fetch excluded) into one NNAdapter
model and runs it on builtin_device's interpreter; it returns {output var: array} and the model.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable

import numpy as np

from nnadapter_bridge.nnadapter.codes import dtype_precision
from nnadapter_bridge.nnadapter.types import OperandType


@contextlib.contextmanager
def paddle_static():
    """Legacy static mode for the duration of the block (dygraph tests share the process)."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        yield paddle
    finally:
        if was_dynamic:
            paddle.disable_static()


@dataclasses.dataclass
class SavedProgram:
    model_path: str  # a .pdmodel file or a dir
    params_path: str | None
    feeds: dict
    outputs: list  # reference outputs in fetch order (None when paddle could not run it)


def _run_saved(paddle, model_dir: str, model_filename: str, params_filename: str | None, feeds: dict):
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, feed_names, fetch_vars = paddle.static.load_inference_model(
            model_dir, exe, model_filename=model_filename, params_filename=params_filename)
        results = exe.run(program, feed={n: feeds[n] for n in feed_names}, fetch_list=fetch_vars)
    return [np.asarray(r) for r in results]


def static_program(tmp_path, build: Callable, feeds: dict, *, seed: int = 7) -> SavedProgram:
    """Build with paddle static mode, save in the legacy format, and run the saved program in Paddle."""
    with paddle_static() as paddle:
        paddle.seed(seed)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            inputs = {
                name: paddle.static.data(name, shape=list(a.shape), dtype=str(a.dtype)) for name, a in feeds.items()
            }
            outs = build(**inputs)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.Scope()
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [inputs[n] for n in feeds], outs, exe, program=main)
        # A program without parameters gets no .pdiparams file.
        params_path = prefix + ".pdiparams" if os.path.exists(prefix + ".pdiparams") else None
        want = _run_saved(paddle, str(tmp_path), "model.pdmodel", params_path and "model.pdiparams", feeds)
    return SavedProgram(prefix + ".pdmodel", params_path, dict(feeds), want)


def opdesc_program(tmp_path, op_type: str, *, inputs: dict, outputs: dict, attrs: dict | None = None,
                   feeds: dict, params: dict | None = None, extra_vars: list | None = None,
                   run_paddle: bool = True) -> SavedProgram:
    """Write a one-op program as an OpDesc (plus feed/fetch) and, if `run_paddle`, its Paddle reference.

    inputs/outputs: {slot: [var names]}; feeds: {name: array}; params: {name: array} (persistable);
    output vars are declared float32 with unknown shape unless `extra_vars` declares them.
    """
    from devtools.zoo import write_combined_params, write_program

    params = params or {}
    declared = {v["name"] for v in (extra_vars or [])}
    var_specs = list(extra_vars or [])
    for name, a in feeds.items():
        if name not in declared:
            var_specs.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape)})
    for name, a in params.items():
        if name not in declared:
            var_specs.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape), "persistable": True})
    fetch_names = [n for names in outputs.values() for n in names]
    for name in fetch_names:
        if name not in declared and name not in feeds:
            var_specs.append({"name": name, "dtype": "float32", "shape": []})
    op = {"type": op_type, "inputs": inputs, "outputs": outputs, "attrs": attrs or {}}
    model_path = os.path.join(str(tmp_path), "__model__")
    params_path = os.path.join(str(tmp_path), "__params__") if params else None
    write_program(model_path, [{"vars": var_specs, "ops": [op]}], feeds=list(feeds), fetches=fetch_names)
    if params:
        write_combined_params(params_path, params)
    want = None
    if run_paddle:
        with paddle_static() as paddle:
            want = _run_saved(paddle, str(tmp_path), "__model__", "__params__" if params else None, feeds)
    return SavedProgram(model_path, params_path, dict(feeds), want)


def convert_and_run(model_path: str, feeds: dict, params_path: str | None = None):
    """Load, convert all of block 0 into one NNAdapter model, run it; ({var: array}, ConversionResult)."""
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.reference import run_model

    graph = load_model(model_path, params_path)
    ops = [op for op in graph.ops() if op.type not in ("feed", "fetch")]
    input_types = {name: OperandType(precision=dtype_precision(np.asarray(feeds[name]).dtype),
                                     dims=np.asarray(feeds[name]).shape) for name in sorted(graph.inputs)}
    result = convert_subgraph(ops, graph.params, input_types, graph.outputs, graph)
    outs = run_model(result.model, [np.asarray(feeds[n]) for n in result.input_names])
    return dict(zip(result.output_names, outs)), result, graph


def check_program(saved: SavedProgram, *, want: list | None = None, model_tolerance: bool = False,
                  atol: float | None = None, rtol: float | None = None):
    """Convert + run `saved` and compare every fetched output with Paddle's (or `want`)."""
    from support.tolerances import OP_ATOL, OP_RTOL, assert_model_close, assert_op_close

    got, result, graph = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    want = want if want is not None else saved.outputs
    assert want is not None, "no reference outputs: pass want= or let Paddle run the program"
    assert len(want) == len(graph.outputs)
    for name, expected in zip(graph.outputs, want):
        assert name in got, f"output '{name}' was not produced by the conversion (got {sorted(got)})"
        if model_tolerance:
            assert_model_close(got[name], expected, what=name)
        else:
            assert_op_close(got[name], expected, atol=atol if atol is not None else OP_ATOL,
                            rtol=rtol if rtol is not None else OP_RTOL, what=name)
    return got, result


def run_static(tmp_path, op_type, build, feeds):
    """Build, convert, run, compare; and make sure the program holds `op_type` and nothing else (the
    Paddle API chose it), so the test exercises exactly that converter."""
    got, result = check_program(static_program(tmp_path, build, feeds))
    converted = {origin.type for origin in result.operation_origin if origin is not None}
    assert converted == {op_type}, f"the program converted {sorted(converted)}, not only '{op_type}'"
    return got, result


def run_opdesc(tmp_path, op_type, inputs, outputs, attrs, feeds, *, params=None, want=None):
    """An OpDesc program for `op_type`, converted, run and compared (with Paddle's run unless `want`)."""
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs=outputs, attrs=attrs, feeds=feeds,
                           params=params, run_paddle=want is None)
    return check_program(saved, want=want)


# -- Paddle 3 PIR programs ------------------------------------------------------------------------------------
#
# `pir_program(tmp_path, build, feeds)` builds with paddle's API in PIR static mode and saves `model.json` (+
# `model.pdiparams` when the program has parameters); the reference is Paddle Inference reading that `.json`.
# conftest sets FLAGS_enable_pir_api=0 before paddle is imported, but `paddle.pir_utils.IrGuard()` switches the
# static API to PIR for the duration of a block and back (checked with paddle 3.3.1: legacy static builds work
# again afterwards, and Paddle Inference reads `.json` programs whatever the flag), so this runs in-process.


@contextlib.contextmanager
def paddle_pir_static():
    """PIR static mode for the duration of the block; the legacy mode (and dygraph) come back after it."""
    with paddle_static() as paddle:
        from paddle import pir_utils

        with pir_utils.IrGuard():
            yield paddle


def paddle_inference_run(model_path: str, params_path: str | None, feeds: dict, lods: dict | None = None) -> list:
    """Paddle Inference on CPU (no IR optimization: the program as written); outputs in fetch order.
    `model_path` is a model file, or a directory holding `__model__` and one file per parameter. `lods`: a LoD set
    on the feeds it names (what an upstream LoD op would give)."""
    import paddle.inference as paddle_infer

    if os.path.isdir(model_path):
        config = paddle_infer.Config(model_path)
    else:
        config = paddle_infer.Config(model_path, params_path or "")
    config.disable_gpu()
    config.disable_mkldnn()
    config.switch_ir_optim(False)
    config.set_cpu_math_library_num_threads(1)
    config.disable_glog_info()
    predictor = paddle_infer.create_predictor(config)
    for name in predictor.get_input_names():
        array = np.asarray(feeds[name], order="C")  # a 0-d feed stays 0-d (np.ascontiguousarray gives [1])
        handle = predictor.get_input_handle(name)
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
        if lods and name in lods:
            handle.set_lod(lods[name])
    predictor.run()
    return [np.asarray(predictor.get_output_handle(n).copy_to_cpu()) for n in predictor.get_output_names()]


def pir_program(tmp_path, build: Callable, feeds: dict, *, seed: int = 7, run_paddle: bool = True) -> SavedProgram:
    """Build with paddle's API in PIR static mode, save `model.json` (+ `.pdiparams`), and (if `run_paddle`)
    take the reference from Paddle Inference reading the saved `.json`.

    `build(**inputs)` gets one `paddle.static.data` per feed (named, shaped and typed after it) and returns the
    output value(s); parameters it creates are initialized from `seed`.
    """
    shapes = {name: np.shape(a) for name, a in feeds.items()}
    dtypes = {name: str(np.asarray(a).dtype) for name, a in feeds.items()}
    json_path, params_path = save_declared(tmp_path, build, shapes, seed=seed, dtypes=dtypes)
    want = paddle_inference_run(json_path, params_path, feeds) if run_paddle else None
    return SavedProgram(json_path, params_path, dict(feeds), want)


def save_declared(tmp_path, build: Callable, declared: dict, *, pir: bool = True, seed: int = 7,
                  dtypes: dict | None = None) -> tuple:
    """Build `build(**inputs)` with feed vars declared {name: shape} (-1 allowed; float32 unless `dtypes` names
    another), save it as a PIR `.json` (or a legacy `.pdmodel`); (model path, params path or None)."""
    guard = paddle_pir_static if pir else paddle_static
    with guard() as paddle:
        paddle.seed(seed)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            inputs = {name: paddle.static.data(name, shape=list(shape), dtype=(dtypes or {}).get(name, "float32"))
                      for name, shape in declared.items()}
            outs = build(**inputs)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [inputs[n] for n in declared], outs, exe, program=main)
    model = prefix + (".json" if pir else ".pdmodel")
    params = prefix + ".pdiparams" if os.path.exists(prefix + ".pdiparams") else None
    return model, params


def pir_op_names(model_path: str) -> list:
    """The `pd_op.*` names of a saved PIR program's top block, in order (what paddle wrote, for messages)."""
    import json

    with open(model_path, encoding="utf-8") as f:
        doc = json.load(f)
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    return [op["#"].replace("1.", "pd_op.", 1) for op in ops if op.get("#", "").startswith("1.")]


def run_pir(tmp_path, op_type, build, feeds, *, exact: bool = False, want: list | None = None, **tolerance):
    """Build in PIR, convert + run on builtin_device, compare with Paddle Inference on the `.json` (or `want`); the
    translated program must hold the legacy `op_type` (with `exact`, its conversion must come from that op type
    only, like run_static). Returns (outputs by name, ConversionResult, SavedProgram)."""
    from nnadapter_bridge.loader import load_model

    saved = pir_program(tmp_path, build, feeds, run_paddle=want is None)
    graph = load_model(saved.model_path, saved.params_path)
    translated = {op.type for op in graph.ops() if op.type not in ("feed", "fetch")}
    assert op_type in translated, (
        f"the PIR program translated to {sorted(translated)}, no '{op_type}' "
        f"(paddle wrote {pir_op_names(saved.model_path)})"
    )
    got, result = check_program(saved, want=want, **tolerance)
    if exact:
        converted = {origin.type for origin in result.operation_origin if origin is not None}
        assert converted == {op_type}, f"the PIR program converted {sorted(converted)}, not only '{op_type}'"
    return got, result, saved


def device_predictor(model_path: str, device: str, params_path: str | None = None):
    """A predictor for `model_path` on `device` alone; intel_openvino computes at f32 (on a CPU with bf16, as this
    project's machines have, OpenVINO would pick bf16 and no float32 tolerance would hold)."""
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(model_path)
    if params_path:
        config.set_param_file(params_path)
    config.set_nnadapter_device_names([device])
    if device == "intel_openvino":
        config.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_PRECISION=f32")
    return nb.create_predictor(config)


def run_predictor(saved: SavedProgram, device: str) -> list:
    """`saved` (legacy or PIR) through nnadapter_bridge's predictor on `device`; the outputs in fetch order."""
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(np.asarray(saved.feeds[name]))
    predictor.run()
    return [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]


def run_recording_splits(predictor, feeds: dict) -> tuple:
    """(the outputs in fetch order, the SubgraphSplitWarning texts) of one run of `predictor` on `feeds`."""
    import warnings

    from nnadapter_bridge.subgraph.engine import SubgraphSplitWarning

    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(array)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.run()
    said = [str(w.message) for w in caught if issubclass(w.category, SubgraphSplitWarning)]
    return [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))], said
