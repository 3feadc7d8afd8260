"""Runs inside the Paddle Lite side venv (tests/support/paddlelite_env.py builds it; Python 3.10, paddlelite
2.13rc0, numpy<2); never imported by the test process. Usage: `python paddlelite_side.py COMMAND WORKDIR`, where
WORKDIR/request.json holds the arguments and WORKDIR/in<k>.npy the input arrays (names in request["inputs"]).
Writes WORKDIR/result.json and WORKDIR/out<k>.npy.

Commands:
  export  name, out_dir, repo: the zoo network `name` (devtools.zoo._build_network, imported from `repo`)
          built with this venv's paddle 2.6.2, its persistable vars set from the input arrays (every one named,
          shapes equal), saved with save_inference_model as out_dir/<name>.pdmodel + .pdiparams. Paddle Lite's
          opt cannot read paddle 3.3.1's exports (relu6 without `threshold`; crashes), this gives it the same
          function in the format it knows.
  opt  model_file, param_file (None: model_file is a model dir), out, valid_places -> out + ".nb"
  export_small  name (fc_net | embedding_net), out_dir: small paddle 2.6.2 programs whose opt output holds the
          fused ops the zoo models do not give: conv2d + Bias + relu, `fc` (mul + add, with and without
          activation_type relu), softmax; lookup_table_v2 (int64 ids), reduce_mean, matmul_v2 and
          fusion_elementwise_add_activation (tanh)
  run  nb, from_buffer: MobileConfig (set_model_from_file or set_model_from_buffer), inputs fed by name
  ptq  model_file, param_file, out_dir, weight_quantize_type, input_name: this paddle 2.6.2's
          PostTrainingQuantization (abs_max activations, onnx_format False: the fake quant ops Paddle Lite's opt
          turns into its own form) calibrated on 32 seeded images; saves out_dir/model.pdmodel + .pdiparams and
          returns Paddle Inference's output of the quantized model on the input array (the reference)
"""
import json
import os
import sys

import numpy as np


def _opt(request):
    import paddlelite.lite as lite

    opt = lite.Opt()
    if request["param_file"] is None:
        opt.set_model_dir(request["model_file"])
    else:
        opt.set_model_file(request["model_file"])
        opt.set_param_file(request["param_file"])
    opt.set_valid_places(request["valid_places"])
    opt.set_model_type("naive_buffer")
    opt.set_optimize_out(request["out"])
    opt.run()
    if not os.path.isfile(request["out"] + ".nb"):
        raise SystemExit(f"opt wrote no {request['out']}.nb")
    return {"nb": request["out"] + ".nb"}, []


def _export(request, arrays):
    sys.path.insert(0, request["repo"])
    import paddle

    from devtools import zoo
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        feeds, fetches = zoo._build_network(paddle, request["name"])
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.global_scope()
    exe.run(startup)
    persistable = sorted(v.name for v in main.list_vars() if v.persistable and v.name not in ("feed", "fetch"))
    rebuilt = [np.array(scope.find_var(name).get_tensor()) for name in persistable]
    arrays = _match_names(arrays, persistable, rebuilt)
    for name in persistable:
        tensor = scope.find_var(name).get_tensor()
        have = np.array(tensor)
        if have.shape != arrays[name].shape or have.dtype != arrays[name].dtype:
            raise SystemExit(f"{name}: rebuilt {have.dtype}{list(have.shape)}, given "
                             f"{arrays[name].dtype}{list(arrays[name].shape)}")
        tensor.set(arrays[name], paddle.CPUPlace())
    os.makedirs(request["out_dir"], exist_ok=True)
    prefix = os.path.join(request["out_dir"], request["name"])
    paddle.static.save_inference_model(prefix, feeds, fetches, exe, program=main)
    _lite_compatible(prefix + ".pdmodel")
    return {"model_file": prefix + ".pdmodel", "param_file": prefix + ".pdiparams"}, []


def _match_names(arrays, persistable, rebuilt):
    """The given weights keyed by the rebuilt program's names (`persistable`, their arrays `rebuilt`). paddle
    2.6 and 3.3 number some layers apart (yolo_detector: this conv2d_2.w_0 is 3.3's conv2d_1.w_0); a name whose
    given array has another shape is paired with a leftover one of the same suffix (`w_0`, `b_0`, ...) and
    shape, in numeric order."""
    import re

    def order(name):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

    shapes = {name: tuple(array.shape) for name, array in zip(persistable, rebuilt)}
    out = {n: arrays[n] for n in persistable if n in arrays and tuple(arrays[n].shape) == shapes[n]}
    leftover = sorted((n for n in arrays if n not in out), key=order)
    for name in sorted((n for n in persistable if n not in out), key=order):
        suffix = name.rsplit(".", 1)[-1]
        found = [n for n in leftover if n.rsplit(".", 1)[-1] == suffix and tuple(arrays[n].shape) == shapes[name]]
        if not found:
            raise SystemExit(f"weights do not match the rebuilt program: nothing for {name} {list(shapes[name])} "
                             f"among {leftover}")
        out[name] = arrays[found[0]]
        leftover.remove(found[0])
    if leftover:
        raise SystemExit(f"weights left over after matching the rebuilt program: {leftover}")
    return out


# Attributes paddle >= 2.5 no longer writes and Paddle Lite 2.13 reads without a default (GetAttr aborts).
_LITE_ATTRS = {"relu6": {"threshold": 6.0}, "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0}}


def _lite_compatible(path):
    """Edit the saved program so Paddle Lite 2.13's opt takes it: paddle 2.6 writes flatten_contiguous_range
    without its XShape output (opt then segfaults) and relu6 / hard_swish without the attributes Lite requires.
    The values are the ones paddle 2.6 computes with (relu6 clips at 6, hard_swish uses 6, 6, 3)."""
    from paddle.base.proto import framework_pb2 as pb

    program = pb.ProgramDesc()
    with open(path, "rb") as f:
        program.ParseFromString(f.read())
    for block in program.blocks:
        declared = {v.name: v for v in block.vars}
        for op in block.ops:
            if op.type == "flatten_contiguous_range" and not any(o.parameter == "XShape" for o in op.outputs):
                source = declared[op.inputs[0].arguments[0]]
                xshape = block.vars.add()
                xshape.CopyFrom(source)
                xshape.name = op.outputs[0].arguments[0] + ".xshape"
                xshape.persistable = False
                del xshape.type.lod_tensor.tensor.dims[:]
                xshape.type.lod_tensor.tensor.dims.extend([0] + list(source.type.lod_tensor.tensor.dims))
                slot = op.outputs.add()
                slot.parameter = "XShape"
                slot.arguments.append(xshape.name)
            for name, value in _LITE_ATTRS.get(op.type, {}).items():
                if not any(a.name == name for a in op.attrs):
                    attr = op.attrs.add()
                    attr.name, attr.type, attr.f = name, pb.FLOAT, value
    with open(path, "wb") as f:
        f.write(program.SerializeToString())


def _export_small(request):
    import paddle

    paddle.enable_static()
    paddle.seed(0)
    np.random.seed(0)
    exe = paddle.static.Executor(paddle.CPUPlace())
    main, start = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, start):
        if request["name"] == "fc_net":
            x = paddle.static.data("x", [1, 3, 8, 8], "float32")
            c = paddle.static.nn.conv2d(x, num_filters=4, filter_size=3, padding=1)
            p = paddle.nn.functional.max_pool2d(paddle.nn.functional.relu(c), kernel_size=2, stride=2)
            f = paddle.static.nn.fc(p, size=10, activation="relu")
            feeds, fetches = [x], [paddle.nn.functional.softmax(paddle.static.nn.fc(f, size=5))]
        else:
            ids = paddle.static.data("ids", [2, 6], "int64")
            m = paddle.mean(paddle.static.nn.embedding(ids, size=[20, 8]), axis=1)
            w = paddle.static.create_parameter([8, 3], "float32")
            b = paddle.static.create_parameter([3], "float32")
            feeds, fetches = [ids], [paddle.tanh(paddle.add(paddle.matmul(m, w), b))]
    exe.run(start)
    for var in main.list_vars():  # parameters drawn again: create_parameter's default init leaves b at 0
        if var.persistable and var.name not in ("feed", "fetch"):
            tensor = paddle.static.global_scope().find_var(var.name).get_tensor()
            shape = np.array(tensor).shape
            tensor.set(np.random.uniform(-0.5, 0.5, shape).astype("float32"), paddle.CPUPlace())
    prefix = os.path.join(request["out_dir"], request["name"])
    paddle.static.save_inference_model(prefix, feeds, fetches, exe, program=main)
    return {"model_file": prefix + ".pdmodel", "param_file": prefix + ".pdiparams"}, []


def _ptq(request, arrays):
    import paddle

    paddle.enable_static()
    from paddle.static.quantization import PostTrainingQuantization

    main = paddle.static.Program()
    with paddle.static.program_guard(main):
        image = paddle.static.data(request["input_name"], [-1, 3, 224, 224], "float32")

    class Images(paddle.io.Dataset):  # paddle 2.6.2's PTQ takes a paddle.io.DataLoader only
        def __init__(self):
            self.data = np.random.default_rng(2024).standard_normal((32, 3, 224, 224)).astype("float32")

        def __getitem__(self, k):
            return self.data[k]

        def __len__(self):
            return len(self.data)

    loader = paddle.io.DataLoader(Images(), feed_list=[image], places=paddle.CPUPlace(), batch_size=4,
                                  return_list=False)
    exe = paddle.static.Executor(paddle.CPUPlace())
    model_dir, model_file = os.path.split(request["model_file"])
    ptq = PostTrainingQuantization(executor=exe, model_dir=model_dir, model_filename=model_file,
                                   params_filename=os.path.basename(request["param_file"]), data_loader=loader,
                                   batch_nums=8, algo="abs_max",
                                   weight_quantize_type=request["weight_quantize_type"], onnx_format=False)
    ptq.quantize()
    ptq.save_quantized_model(request["out_dir"], model_filename="model.pdmodel", params_filename="model.pdiparams")
    import paddle.inference as paddle_infer

    config = paddle_infer.Config(os.path.join(request["out_dir"], "model.pdmodel"),
                                 os.path.join(request["out_dir"], "model.pdiparams"))
    config.disable_mkldnn()
    config.switch_ir_optim(False)
    predictor = paddle_infer.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    handle.copy_from_cpu(np.ascontiguousarray(arrays["x"]))
    predictor.run()
    out = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    return {"model_file": os.path.join(request["out_dir"], "model.pdmodel"),
            "param_file": os.path.join(request["out_dir"], "model.pdiparams")}, [out]


def _run(request, arrays):
    from paddlelite.lite import MobileConfig, create_paddle_predictor

    config = MobileConfig()
    if request["from_buffer"]:
        with open(request["nb"], "rb") as f:
            config.set_model_from_buffer(f.read())
    else:
        config.set_model_from_file(request["nb"])
    predictor = create_paddle_predictor(config)
    names = list(predictor.get_input_names())
    for name, array in arrays.items():
        if name not in names:
            raise SystemExit(f"input {name!r} is not one of the model's {names}")
        predictor.get_input_by_name(name).from_numpy(np.ascontiguousarray(array))
    predictor.run()
    outputs = [np.array(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]
    return {"input_names": names, "output_names": list(predictor.get_output_names())}, outputs


def main():
    command, work = sys.argv[1], sys.argv[2]
    with open(os.path.join(work, "request.json")) as f:
        request = json.load(f)
    arrays = {name: np.load(os.path.join(work, f"in{k}.npy"), allow_pickle=False)
              for k, name in enumerate(request["inputs"])}
    if command == "opt":
        result, outputs = _opt(request)
    elif command == "export_small":
        result, outputs = _export_small(request)
    elif command == "export":
        result, outputs = _export(request, arrays)
    elif command == "run":
        result, outputs = _run(request, arrays)
    elif command == "ptq":
        result, outputs = _ptq(request, arrays)
    else:
        raise SystemExit(f"unknown command {command!r}")
    for k, array in enumerate(outputs):
        np.save(os.path.join(work, f"out{k}.npy"), array, allow_pickle=False)
    result["num_outputs"] = len(outputs)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
