"""builtin_device vs Paddle Inference (oneDNN off) on a MobileNetV1-sized conv stack at 224x224.

The stack is MobileNetV1's feature extractor: conv 3x3/2 (32) then 13 depthwise-separable blocks
(depthwise 3x3 + pointwise 1x1, each followed by ReLU; batch norm folded into the conv bias, as an
inference model has it), global average pool. Both sides get the same random weights. Ours is built
directly as an NNAdapter model and run through the runtime on builtin_device; Paddle's is the same stack
built with paddle.static, saved in the legacy format, and run with paddle.inference (disable_mkldnn).

    python benchmarks/bench_builtin_convstack.py [--runs 20] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("FLAGS_enable_pir_api", "0")  # must precede `import paddle`
os.environ.setdefault("GLOG_minloglevel", "2")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# (out_channels, stride) of the 13 depthwise-separable blocks of MobileNetV1.
BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1),
          (512, 1), (1024, 2), (1024, 1)]


def make_weights(seed: int = 0):
    rng = np.random.default_rng(seed)
    layers = []  # (weight [Cout, Cin/g, k, k], bias [Cout], stride, pad, groups)
    cin = 3

    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    layers.append((he((32, 3, 3, 3), 27), np.zeros(32, np.float32), 2, 1, 1))
    cin = 32
    for cout, stride in BLOCKS:
        layers.append((he((cin, 1, 3, 3), 9), (rng.standard_normal(cin) * 0.01).astype(np.float32), stride, 1, cin))
        layers.append((he((cout, cin, 1, 1), cin), (rng.standard_normal(cout) * 0.01).astype(np.float32), 1, 0, 1))
        cin = cout
    return layers


def build_nnadapter_model(layers, batch: int):
    from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
    from nnadapter_bridge.nnadapter.codes import OperationType as T
    from nnadapter_bridge.nnadapter.model import Model
    from nnadapter_bridge.nnadapter.types import OperandType

    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(batch, 3, 224, 224)), "x")
    cur = x
    for i, (w, b, stride, pad, groups) in enumerate(layers):
        out = model.add_output(f"conv{i}")
        model.add_operation(T.CONV_2D, [
            cur, model.add_constant(w), model.add_constant(b), model.add_constant(np.int32(0)),
            model.add_constant(np.array([pad] * 4, np.int32)), model.add_constant(np.array([stride] * 2, np.int32)),
            model.add_constant(np.int32(groups)), model.add_constant(np.array([1, 1], np.int32)),
            model.add_constant(np.int32(FuseCode.FUSED_RELU))], [out])
        cur = out
    pooled = model.add_output("pool")
    model.add_operation(T.ADAPTIVE_AVERAGE_POOL_2D, [cur, model.add_constant(np.array([1, 1], np.int32))], [pooled])
    model.identify_inputs_and_outputs([x], [pooled])
    model.finish()
    return model


def run_ours(layers, x: np.ndarray, runs: int, threads: int):
    from nnadapter_bridge.nnadapter.runtime import Compilation, Context, Execution, acquire_device

    model = build_nnadapter_model(layers, x.shape[0])
    context = Context([acquire_device("builtin_device")], f"BUILTIN_DEVICE_NUM_THREADS={threads}")
    compilation = Compilation(model, context=context)
    compilation.finish()
    execution = Execution(compilation)
    out = execution.run([x])[0]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        execution.run([x])
        times.append(time.perf_counter() - t0)
    return out, times


def run_paddle(layers, x: np.ndarray, runs: int, threads: int):
    import paddle

    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        inp = paddle.static.data("x", shape=list(x.shape), dtype="float32")
        cur = inp
        for i, (w, b, stride, pad, groups) in enumerate(layers):
            conv = paddle.nn.Conv2D(
                w.shape[1] * groups,
                w.shape[0],
                w.shape[2],
                stride=stride,
                padding=pad,
                groups=groups,
                weight_attr=paddle.ParamAttr(name=f"w{i}", initializer=paddle.nn.initializer.Assign(w)),
                bias_attr=paddle.ParamAttr(name=f"b{i}", initializer=paddle.nn.initializer.Assign(b)),
            )
            cur = paddle.nn.functional.relu(conv(cur))
        out = paddle.nn.functional.adaptive_avg_pool2d(cur, 1)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    tmp = tempfile.mkdtemp(prefix="nb-bench-")
    prefix = os.path.join(tmp, "convstack")
    paddle.static.save_inference_model(prefix, [inp], [out], exe, program=main)
    paddle.disable_static()
    config = paddle.inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.disable_mkldnn()
    config.set_cpu_math_library_num_threads(threads)
    config.disable_glog_info()
    predictor = paddle.inference.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    output = predictor.get_output_handle(predictor.get_output_names()[0])
    handle.copy_from_cpu(x)
    predictor.run()
    result = output.copy_to_cpu()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        handle.copy_from_cpu(x)
        predictor.run()
        output.copy_to_cpu()
        times.append(time.perf_counter() - t0)
    return result, times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)
    layers = make_weights()
    x = np.random.default_rng(1).standard_normal((args.batch, 3, 224, 224)).astype(np.float32)
    ours, ours_t = run_ours(layers, x, args.runs, args.threads)
    ref, ref_t = run_paddle(layers, x, args.runs, args.threads)
    err = float(np.max(np.abs(ours - ref)))
    scale = float(np.max(np.abs(ref)))
    m_ours, m_ref = statistics.median(ours_t) * 1e3, statistics.median(ref_t) * 1e3
    print(f"MobileNetV1-sized conv stack, batch {args.batch}, 224x224, {args.threads} thread(s), {args.runs} runs")
    print(f"{'runner':<40} {'median ms':>10} {'p90 ms':>10}")
    for name, t in (("builtin_device (numpy)", ours_t), ("Paddle Inference, oneDNN off", ref_t)):
        print(f"{name:<40} {statistics.median(t) * 1e3:>10.2f} {np.percentile(t, 90) * 1e3:>10.2f}")
    print(f"ratio builtin/paddle: {m_ours / m_ref:.2f}x; max abs diff {err:.3g} (max |out| {scale:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
