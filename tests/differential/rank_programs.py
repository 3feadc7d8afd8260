"""Builds the result-rank layout programs (run as a script by test_result_ranks.py, in the test venv with paddle
3.3.1 and FLAGS_enable_pir_api=0, and in the Python 3.10 side venv with paddle 2.6.2; never imported).

    python rank_programs.py OUT_DIR

One legacy static-mode program holding each op family issue 28 names on a 0-d feed `x`, a 0-d feed `b`
(bool), a 0-d parameter `w` and a `[1]` parameter `w1`: unary math, clip, logical ops, shrink, elu, leaky_relu,
hard_sigmoid, cast (to int8 and uint8 too: paddle 2.6.2 appends an identity scale to every fetched var), assign,
the output of a conditional_block and of a while loop. It is saved in two layouts:
OUT_DIR/combined/model.pdmodel + model.pdiparams (save_inference_model) and OUT_DIR/separate/__model__ + one
file per parameter (save_vars). Imports only numpy and paddle.
"""
from __future__ import annotations

import os
import shutil
import sys
import warnings

import numpy as np


def build(paddle):
    x = paddle.static.data("x", shape=[], dtype="float32")
    b = paddle.static.data("b", shape=[], dtype="bool")
    w = paddle.static.create_parameter(shape=[], dtype="float32", name="w",
                                       default_initializer=paddle.nn.initializer.Constant(0.75))
    w1 = paddle.static.create_parameter(shape=[1], dtype="float32", name="w1",
                                        default_initializer=paddle.nn.initializer.Constant(-0.5))
    f = paddle.nn.functional
    xw = x * w

    def looped():
        i, limit = paddle.full([], 0, "int64"), paddle.full([], 3, "int64")
        return paddle.static.nn.while_loop(lambda i, v: i < limit, lambda i, v: [i + 1, v * 2.0], [i, xw])[1]

    families = [
        lambda: paddle.tanh(xw), lambda: paddle.exp(x), lambda: paddle.clip(xw, -0.2, 0.2), lambda: f.elu(xw),
        lambda: f.leaky_relu(xw - 1.0), lambda: f.hardsigmoid(xw), lambda: f.softshrink(xw, 0.1),
        lambda: f.hardshrink(x, 0.2), lambda: paddle.cast(xw, "int32"), lambda: paddle.assign(w),
        lambda: paddle.cast(b, "float32"), lambda: paddle.cast(xw * 100.0, "uint8"),
        lambda: paddle.cast(xw * 100.0, "int8"),
        lambda: paddle.logical_not(b), lambda: paddle.logical_and(b, x > w), lambda: f.elu(w), lambda: x * w1,
        lambda: paddle.static.nn.cond(x > w, lambda: x + w, lambda: x - w), looped,
    ]
    outs = []
    for family in families:
        try:
            outs.append(family())
        except TypeError:  # paddle 3.3.1's legacy static mode lacks some APIs (tanh, exp, logical ops, cond)
            continue
    return [x, b], outs


def main(out_dir: str) -> None:
    import paddle

    warnings.simplefilter("ignore")
    paddle.enable_static()
    main_program, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main_program, startup):
        feeds, outs = build(paddle)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        combined = os.path.join(out_dir, "combined")
        paddle.static.save_inference_model(os.path.join(combined, "model"), feeds, outs, exe, program=main_program)
        program, _, _ = paddle.static.load_inference_model(os.path.join(combined, "model"), exe)
        separate = os.path.join(out_dir, "separate")
        os.makedirs(separate, exist_ok=True)
        shutil.copy(os.path.join(combined, "model.pdmodel"), os.path.join(separate, "__model__"))
        paddle.static.save_vars(exe, separate, main_program=program,
                                predicate=lambda v: v.persistable and v.name in ("w", "w1"))
    np.savez(os.path.join(out_dir, "feeds.npz"), x=np.array(0.8, np.float32), b=np.array(True))


if __name__ == "__main__":
    main(sys.argv[1])
