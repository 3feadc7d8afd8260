"""`convert --export-subgraphs DIR`: each compiled subgraph as something a person can open, from its `.nnc`.

Per device program of subgraph i (read back from the `.nnc` convert wrote, so what is exported is what a later
predictor restores):
  microsoft_onnxruntime  `subgraph<i>.microsoft_onnxruntime.onnx`: the ONNX model itself (Netron, onnxruntime);
  intel_openvino         `subgraph<i>.intel_openvino.xml/.bin`: the OpenVINO IR the driver compiles (the subgraph
                         converted again for the compiled input types and built as the driver builds it; Netron,
                         benchmark_app), and `.runtime.xml` beside it: the compiled program's runtime model
                         (what the CPU plugin executes: fused layers, precisions; Netron only);
  builtin_device         `subgraph<i>.builtin_device.nnadapter.txt`: the NNAdapter model in text, one operand and
                         one operation per line;
  any other driver       `subgraph<i>.<device>.bin`: its program bytes as they are.
A subgraph with several device programs gets `subgraph<i>.<k>.<device>...` for the k-th.

Entry points: `export` (cmd_convert), `model_text`. Imports the command options; the `.nnc` format, the converters
and intel_openvino's graph builder and openvino only inside `export` (the only place above the middle floor that
imports a driver's module, to rebuild its IR).
"""
from __future__ import annotations

import os

import numpy as np

from nnadapter_bridge.commands.options import CliError


def model_text(model) -> str:
    """An NNAdapter Model as text: inputs, outputs, constants (shape and a few values), operations in order."""
    index = {id(o): i for i, o in enumerate(model.operands)}

    def name(operand) -> str:
        if operand is None:
            return "-"
        label = f"%{index[id(operand)]}"
        return label + (f"({operand.name})" if getattr(operand, "name", "") else "")

    lines = [f"# NNAdapter model: {len(model.operands)} operands, {len(model.operations)} operations",
             "inputs  " + ", ".join(f"{name(o)}: {o.type.describe()}" for o in model.input_operands),
             "outputs " + ", ".join(f"{name(o)}: {o.type.describe()}" for o in model.output_operands), ""]
    for operand in model.operands:
        if operand.value is None:
            continue
        value = np.asarray(operand.value)
        shown = np.array2string(value.reshape(-1)[:6], precision=4, separator=", ")
        more = " ..." if value.size > 6 else ""
        lines.append(f"const {name(operand)}: {operand.type.describe()} = {shown}{more}")
    lines.append("")
    for k, operation in enumerate(model.operations):
        args = ", ".join(name(o) for o in operation.inputs)
        outs = ", ".join(f"{name(o)}: {o.type.describe()}" for o in operation.outputs if o is not None)
        lines.append(f"{k:4d}  {outs} = {operation.type.name}({args})")
    return "\n".join(lines) + "\n"


def _write(path: str, data) -> str:
    with open(path, "wb") as f:
        f.write(bytes(data))
    return path


def _openvino_ir(engine, graph, input_types: list, base: str) -> list:
    """The ov.Model the driver builds for this subgraph at these input types, saved as IR (float32 weights)."""
    import openvino as ov

    from converters.context import convert_subgraph
    from hal.common import lower
    from hal.intel_openvino.graph import build_ov_model
    from hal.intel_openvino.operations import OPERATIONS

    types = dict(zip(engine.input_names, input_types))
    model = convert_subgraph(engine.subgraph.ops, graph.params, types, engine.output_names, graph,
                             float_ops=engine.float_ops).model
    xml = base + ".xml"
    ov.save_model(build_ov_model(lower(model, OPERATIONS), OPERATIONS), xml, compress_to_fp16=False)
    return [xml, base + ".bin"]


def _openvino_runtime_ir(buffer, base: str) -> list:
    import openvino as ov

    core = ov.Core()
    blob = ov.Tensor(np.frombuffer(buffer, dtype=np.uint8), shared_memory=False)
    try:
        compiled = core.import_model(blob, "CPU")
    except TypeError:  # an OpenVINO whose import_model takes no Tensor
        compiled = core.import_model(bytes(buffer), "CPU")
    xml, binary = base + ".runtime.xml", base + ".runtime.bin"
    ov.serialize(compiled.get_runtime_model(), xml, binary)
    return [xml, binary]


def export(programs: list, out_dir: str, predictor) -> list:
    """Write the artifacts of every program in `programs` (output.program_report entries with a .nnc file) of
    `predictor` (still open) into `out_dir`; returns [{"subgraph", "device", "files"}]."""
    from nnadapter_bridge.nnadapter.nnc import read_nnc_file
    from nnadapter_bridge.nnadapter.serialization import deserialize_model

    exported = []
    for program in programs:
        if not program.get("file"):
            continue
        record = read_nnc_file(program["file"])
        if record is None:
            raise CliError(f"--export-subgraphs: {program['file']} cannot be read back")
        several = len(record.programs) > 1
        for k, device_program in enumerate(record.programs):
            device = device_program.device_name
            base = os.path.join(out_dir, f"subgraph{program['subgraph']}" + (f".{k}" if several else "") + f".{device}")
            buffer = device_program.model_buffer
            try:
                if device == "microsoft_onnxruntime":
                    files = [_write(base + ".onnx", buffer)]
                elif device == "intel_openvino":
                    engine = predictor.engines[program["subgraph"]]
                    compiled = next(p for p in engine.programs if p.token == program["token"])
                    files = _openvino_ir(engine, predictor.graph, compiled.input_types, base) \
                        + _openvino_runtime_ir(buffer, base)
                elif device == "builtin_device":
                    with open(base + ".nnadapter.txt", "w") as f:
                        f.write(model_text(deserialize_model(buffer)))
                    files = [base + ".nnadapter.txt"]
                else:
                    files = [_write(base + ".bin", buffer)]
            except OSError as exc:
                raise CliError(f"--export-subgraphs {out_dir}: cannot write {base}: {exc.strerror or exc}") from exc
            exported.append({"subgraph": program["subgraph"], "device": device, "files": files})
    return exported
