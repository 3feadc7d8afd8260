"""`nnadapter-bridge run MODEL`: run a model once and show its outputs, optionally against Paddle Inference.

Inputs come from .npy files (`--input name=file.npy`) or are seeded random data (`--input-shape`,
`--seed`). It prints each output's shape, dtype and min/max/mean/std, saves them as `<name>.npy` with
`--output-dir`, and says for every subgraph whether its program was compiled or restored from the cache
(`--cache-dir`; programs `convert --dynamic-shape` wrote are restored only with the same `--dynamic-shape`).
`--compare-paddle` runs Paddle Inference (CPU, oneDNN and IR optimization off) on the same inputs and
checks every output at DESIGN.md's whole-model tolerance, `|got-want| <= 1e-4*|want| + 1e-5*max|want|`
(integers exact; an infinity or NaN only by the same value, max|want| over the finite values); the exit
status is 1 when an output fails. It also reports the cosine similarity and, for a [..., classes] output,
the top-1 agreement; a quantized model (quantize/dequantize ops or int8 weights) and bf16 / f16 inference
(INTEL_OPENVINO_INFERENCE_PRECISION) are judged by those instead (tolerances.within_reduced_precision:
cosine >= 0.999, top-1 agreement >= 99%), since int8 rounding flips an activation by one step now and
then. A model Paddle Inference itself cannot run is one error line ("Paddle Inference could not run this
model: ...", exit status 2), never Paddle's traceback. `--compare-float FLOAT_MODEL` runs Paddle Inference on
the float model a quantized one came from and reports what quantization costs (the same metrics, no verdict);
`--samples N` judges N seeded random input sets together (top-1 agreement over N inputs).

It also shows where each op ran, as `partition` does: the subgraphs with the device that took them, the host ops
with the reason (and, with several devices, why each declined), ops moved to the host during the run included;
`--per-op` lists every op; `--json` has every op's placement ("placements") and the host share. `--strict` fails
before running when an op the partition config does not keep on the host cannot run on the devices
(Config.set_strict).

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation; the
predictor, the converters and the drivers only inside `run`, so building the parser loads none of them.
"""
from __future__ import annotations

import os
import re
import time

import numpy as np

from nnadapter_bridge.commands import model_config, options, output, partition_report
from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.validation import inputs, paddle_reference


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help="run a model once on .npy or random inputs; optionally compare with Paddle Inference",
        description="Run a Paddle model through nnadapter-bridge once and summarize its outputs. Inputs not given "
                    "with --input are seeded random data. With --compare-paddle the exit status is 1 when an "
                    "output differs from Paddle Inference beyond |got-want| <= 1e-4*|want| + 1e-5*max|want| "
                    "(integer outputs must match exactly).")
    options.add_model_arguments(parser)
    options.add_device_arguments(parser)
    options.add_input_arguments(parser, files=True)
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="model cache dir (created if missing): restore compiled programs from "
                             "<DIR>/<token>.nnc, write new ones")
    options.add_partition_arguments(parser)
    parser.add_argument("--per-op", action="store_true",
                        help="also list every op with its subgraph, the device that ran it and the devices that "
                             "declined it (and why), as `partition --per-op`")
    options.add_dynamic_shape_argument(
        parser, help_tail="Give the same values as `convert --dynamic-shape` to restore its programs. The run "
                          "feeds NAME its --input file, else its --input-shape, else the first of these shapes")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="save every output as DIR/<output name>.npy (DIR is created if missing; characters "
                             "other than letters, digits, '.', '_' and '-' become '_')")
    parser.add_argument("--compare-paddle", action="store_true",
                        help="also run Paddle Inference (paddlepaddle, CPU) on the same inputs and report max abs "
                             "error, max error relative to max|want|, and PASS/FAIL per output")
    parser.add_argument("--compare-float", metavar="FLOAT_MODEL",
                        help="for a quantized (or reduced-precision) run: also run Paddle Inference on this float "
                             "model (file or directory) with the same inputs and report what the reduction costs "
                             "(max errors, cosine, top-1 agreement); informational, not part of the exit status")
    parser.add_argument("--float-params", metavar="FILE", help="the params file of --compare-float's model")
    parser.add_argument("--samples", metavar="N", type=int, default=1,
                        help="with --compare-paddle / --compare-float: run N seeded random input sets (seeds "
                             "SEED..SEED+N-1) and judge the outputs of all of them together (top-1 agreement over "
                             "N inputs); default 1")
    parser.add_argument("--top-k", metavar="K", type=int, dest="top_k",
                        help="for a classifier: the K largest scores of each float output along its last axis "
                             "(class index and score, per row)")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def output_file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def run(args) -> int:
    comparing = args.compare_paddle or args.compare_float
    if comparing and not paddle_reference.paddle_available():
        flag = "--compare-paddle" if args.compare_paddle else "--compare-float"
        raise CliError(f"{flag}: paddlepaddle is not installed, so there is no Paddle Inference to "
                       "compare with; pip install paddlepaddle (or nnadapter-bridge[paddle])")
    if args.samples < 1:
        raise CliError(f"--samples {args.samples}: expected 1 or more")
    if args.top_k is not None and args.top_k < 1:
        raise CliError(f"--top-k {args.top_k}: expected 1 or more")
    if args.samples > 1 and not comparing:
        raise CliError("--samples: runs several input sets only to compare them (--compare-paddle or "
                       "--compare-float)")
    if args.float_params and not args.compare_float:
        raise CliError("--float-params: give it with --compare-float")
    if args.compare_paddle:
        paddle_reference.check_paddle_readable(args.model, params=args.params)
    if args.compare_float:
        paddle_reference.check_paddle_readable(args.compare_float, params=args.float_params)
    if args.output_dir and os.path.exists(args.output_dir) and not os.path.isdir(args.output_dir):
        raise CliError(f"--output-dir {args.output_dir}: exists and is not a directory")
    if args.cache_dir and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise CliError(f"--cache-dir {args.cache_dir}: exists and is not a directory")
    dynamic = options.dynamic_shape_info(args)
    shapes = options.dynamic_run_shapes(args, dynamic)
    with output.one_line_warnings("run"):
        config = model_config.build_config(args, cache_dir=args.cache_dir, dynamic_shape_info=dynamic or None)
        if args.cache_dir:
            options.make_dir(args.cache_dir, "--cache-dir")
        if args.output_dir:  # before the run, so a bad dir costs no compile
            options.make_dir(args.output_dir, "--output-dir")
        predictor = model_config.open_predictor(config)  # a device that cannot open is an error
        arrays, origin = inputs.make_inputs(predictor, args, shapes=shapes)
        if args.samples > 1 and "random" not in origin.values():
            raise CliError("--samples: every input comes from a file, so the samples would all be the same; "
                           "drop --input for at least one input")
        inputs.feed(predictor, arrays)
        start = time.perf_counter()
        predictor.run()
        seconds = time.perf_counter() - start
        outputs = inputs.outputs_of(predictor)
        sample_inputs, sample_outputs = [arrays], [outputs]
        for k in range(1, args.samples):  # more seeded input sets, judged together with the first
            more, _ = inputs.make_inputs(predictor, _with_seed(args, args.seed + k), shapes=shapes)
            inputs.feed(predictor, more)
            predictor.run()
            sample_inputs.append(more)
            sample_outputs.append(inputs.outputs_of(predictor))
        stats = predictor.stats
        programs = output.program_report(predictor)
        placement = partition_report.report(predictor.plan, predictor.placements(),  # before close: asks the devices
                                            predictor.body_placements())
        predictor.close()

    data = {
        "model": predictor.graph.model_path or "<buffer>",
        "devices": predictor.device_names,
        "inputs": {name: {"shape": list(a.shape), "dtype": str(a.dtype), "from": origin[name]}
                   for name, a in arrays.items()},
        "dynamic_shapes": dynamic,
        "outputs": {name: output.array_summary(a) for name, a in outputs.items()},
        "run_seconds": seconds,
        "num_subgraphs": stats.subgraphs,
        "num_host_ops": stats.host_ops,
        "compiled": stats.builds,
        "restored": stats.cache_hits_file + stats.cache_hits_buffer,
        "programs": programs,
        # Where each op ran and why (as `partition --json`): subgraphs with their devices, host ops with reasons.
        "subgraphs": placement["subgraphs"],
        "host_ops": placement["host_ops"],
        "host_share": placement["host_share"],
        "placements": placement["placements"],
    }
    if "device_selection" in placement:  # a policy by cost (--device-selection): each subgraph's devices and why
        data["device_selection"] = placement["device_selection"]
    if args.top_k:
        data["top_k"] = {name: top_k(array, args.top_k) for name, array in outputs.items()
                         if array.dtype.kind == "f" and array.ndim >= 1 and array.shape[-1] > 1}
    if args.output_dir:
        for name, array in outputs.items():
            path = os.path.join(args.output_dir, output_file_name(name))
            try:
                np.save(path, array)
            except OSError as exc:
                raise CliError(f"--output-dir {args.output_dir}: cannot write {path}: "
                               f"{exc.strerror or exc}") from exc
            data["outputs"][name]["file"] = path
    status = 0
    if args.samples > 1:
        data["samples"] = args.samples
    ours = _stacked(sample_outputs)
    if args.compare_paddle:
        want = _stacked([paddle_reference.paddle_outputs(args.model, args.params, feeds) for feeds in sample_inputs])
        reduced = reduced_precision_reason(predictor, config)
        if reduced:
            data["reduced_precision"] = reduced
        comparison = {}
        for name, got in ours.items():
            if name not in want:
                comparison[name] = {"passed": False, "note": "Paddle Inference has no output of this name"}
                continue
            comparison[name] = paddle_reference.compare(got, want[name], reduced_precision=bool(reduced))
        data["compare_paddle"] = comparison
        data["passed"] = all(c["passed"] for c in comparison.values())
        status = 0 if data["passed"] else 1
    if args.compare_float:
        reference = _stacked([paddle_reference.paddle_outputs(args.compare_float, args.float_params, feeds)
                              for feeds in sample_inputs])
        data["compare_float"] = {"model": args.compare_float, "outputs": _compare_float(ours, reference)}
    if args.json:
        output.print_json(data)
    else:
        output.print_text(render(data))
        if args.per_op:
            print()
            print(partition_report.render_per_op(data))
    return status


def top_k(array: np.ndarray, k: int) -> list:
    """Per row of `array` (every axis but the last flattened): the k largest values along the last axis, as
    [{"class": index, "score": value}, ...] from the largest (NaN last; ties by the lower index)."""
    rows = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])
    k = min(k, rows.shape[-1])
    result = []
    for row in rows:
        order = np.lexsort((np.arange(row.size), -np.nan_to_num(row, nan=-np.inf)))[:k]
        result.append([{"class": int(i), "score": float(row[i])} for i in order])
    return result


def _with_seed(args, seed: int):
    import argparse

    return argparse.Namespace(**{**vars(args), "seed": seed})


def _stacked(samples: list) -> dict:
    """{output name: array}: the one sample's arrays, or every sample's stacked on a new leading axis."""
    if len(samples) == 1:
        return samples[0]
    for name in samples[0]:
        shapes = {tuple(np.shape(s[name])) for s in samples}
        if len(shapes) > 1:
            raise CliError(f"--samples: output {name} changes shape between the input sets "
                           f"({', '.join(str(list(x)) for x in sorted(shapes))}); compare one input set at a time")
    return {name: np.stack([np.asarray(s[name]) for s in samples]) for name in samples[0]}


def _compare_float(ours: dict, reference: dict) -> dict:
    """Our outputs against the float model's, matched by name, else by position (a quantized export may rename
    its fetch vars): the metrics, no verdict (the float model is not what the quantized one should equal)."""
    names, ref_names = list(ours), list(reference)
    pairs = {}
    for k, name in enumerate(names):
        ref = name if name in reference else (ref_names[k] if k < len(ref_names) else None)
        if ref is None:
            pairs[name] = {"note": "the float model has no such output"}
            continue
        entry = paddle_reference.compare(ours[name], reference[ref], reduced_precision=True)
        entry.pop("passed", None)
        entry.pop("tolerance", None)
        entry["float_output"] = ref
        pairs[name] = entry
    return pairs


def reduced_precision_reason(predictor, config) -> str:
    """Why the outputs are judged at the reduced-precision tolerance ("" when they are not): a quantized model,
    or intel_openvino computing in bf16 / f16."""
    from nnadapter_bridge.nnadapter.properties import Properties
    from nnadapter_bridge.subgraph.mixed_precision import is_quantized_model

    if is_quantized_model(predictor.graph):
        return "quantized model"
    if "intel_openvino" in predictor.device_names:
        # The properties the devices got: the relaxed float path (--relax-float32) adds the key to the user's.
        precision = (Properties(predictor.settings.context_properties).get("INTEL_OPENVINO_INFERENCE_PRECISION")
                     or "f32").strip().lower()
        if precision != "f32":
            return f"INTEL_OPENVINO_INFERENCE_PRECISION={precision}"
    return ""


def render(data: dict) -> str:
    lines = [f"model        {data['model']}",
             f"devices      {', '.join(data['devices'])}",
             f"run time     {data['run_seconds'] * 1000:.1f} ms",
             f"subgraphs    {data['num_subgraphs']} ({data['compiled']} compiled, {data['restored']} restored from "
             f"the cache); {data['num_host_ops']} host ops",
             ""]
    lines.append(output.format_table(
        ["input", "shape", "dtype", "from"],
        [[n, str(i["shape"]), i["dtype"], i["from"]] for n, i in data["inputs"].items()]))
    lines.append("")
    rows = []
    for name, s in data["outputs"].items():
        nonfinite = ", ".join(f"{s[k]} {k}" for k in ("nan", "posinf", "neginf") if s.get(k))
        rows.append([name, str(s["shape"]), s["dtype"]] + [output.format_number(s.get(k))
                                                            for k in ("min", "max", "mean", "std")]
                    + [nonfinite or "-"])
    lines.append(output.format_table(["output", "shape", "dtype", "min", "max", "mean", "std", "non-finite"], rows,
                                     right_align={3, 4, 5, 6}))
    saved = [s["file"] for s in data["outputs"].values() if "file" in s]
    if saved:
        lines.append("")
        lines.extend(f"saved {path}" for path in saved)
    if data["programs"]:
        lines.append("")
        lines.append(output.format_table(
            ["subgraph", "ops", "token", "program"],
            [[p["subgraph"], p["ops"], p["token"], p["source"]] for p in data["programs"]], right_align={0, 1}))
    lines.append("")
    lines.extend(partition_report.placement_tables(data))
    if "compare_paddle" in data:
        lines.append("")
        rows = []
        for name, c in data["compare_paddle"].items():
            verdict = "PASS" if c["passed"] else "FAIL"
            if c.get("note"):
                verdict += f" ({c['note']})"
            top1 = c.get("top1_agreement")
            rows.append([name, output.format_number(c.get("max_abs_error")),
                         output.format_number(c.get("max_rel_error")),
                         "-" if c.get("cosine") is None else f"{c['cosine']:.6f}",
                         "-" if top1 is None else f"{top1 * 100:.1f}%", verdict])
        lines.append(output.format_table(["vs Paddle Inference", "max abs error", "max rel error", "cosine", "top-1",
                                          "result"], rows, right_align={1, 2, 3, 4}))
        if data.get("reduced_precision"):
            from nnadapter_bridge.validation.tolerances import REDUCED_COSINE, REDUCED_TOP1

            lines.append(f"tolerance: reduced precision ({data['reduced_precision']}): cosine >= {REDUCED_COSINE} "
                         f"and top-1 agreement >= {REDUCED_TOP1:.0%}")
        lines.append("")
        lines.append("PASS: every output matches Paddle Inference" if data["passed"]
                     else "FAIL: some outputs differ from Paddle Inference")
    if "compare_float" in data:
        lines.append("")
        rows = []
        for name, c in data["compare_float"]["outputs"].items():
            top1 = c.get("top1_agreement")
            rows.append([name, output.format_number(c.get("max_abs_error")),
                         output.format_number(c.get("max_rel_error")),
                         "-" if c.get("cosine") is None else f"{c['cosine']:.6f}",
                         "-" if top1 is None else f"{top1 * 100:.1f}%", c.get("note", "")])
        lines.append(output.format_table(["vs the float model", "max abs error", "max rel error", "cosine", "top-1",
                                          "note"], rows, right_align={1, 2, 3, 4}))
    if data.get("top_k"):
        lines.append("")
        rows = [[name, r, rank + 1, entry["class"], output.format_number(entry["score"])]
                for name, per_row in data["top_k"].items() for r, entries in enumerate(per_row)
                for rank, entry in enumerate(entries)]
        lines.append(output.format_table(["output", "row", "rank", "class", "score"], rows, right_align={1, 2, 3, 4}))
    if data.get("samples"):
        lines.append(f"(judged over {data['samples']} seeded input sets)")
    return "\n".join(lines)
