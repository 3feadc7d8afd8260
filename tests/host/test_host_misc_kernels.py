"""Host kernels for the pass-through and placement ops (print, depend, nop, npu_identity, memcpy, memcpy_d2h), fused
ops (fused_softmax_mask, fused_elemwise_activation, fused_elemwise_add_activation, add_position_encoding), complex
values (angle, conj), spectral_norm, shard_index and the legacy dequantizers (dequantize_abs_max, dequantize_log),
against Paddle: each program is saved, loaded with our loader and run op by op with every host kernel forced, and
compared with Paddle Inference (CPU) on the saved program.

Programs are built in PIR static mode with paddle's API or `paddle._C_ops` where that emits the op. Four ops run in
Paddle 3.3.1 only from a legacy program, written with LayerHelper.append_op in legacy static mode: depend and nop
(their kernels need Out to be X's own var, which a PIR value never is) and fused_elemwise_activation /
fused_elemwise_add_activation (no PIR API emits them; they come from a legacy pass).
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import opdesc_program, pir_program, static_program
from support.host_kernel_check import check, run_on_host

RNG = np.random.default_rng(31)


def ops():
    from paddle import _C_ops

    return _C_ops


# -- pass-through and placement -----------------------------------------------------------------------------
def test_print_npu_identity_memcpy(tmp_path):
    import paddle

    x = RNG.standard_normal((2, 3)).astype(np.float32)
    k = np.array([[3, -7], [2**40, 0]], np.int64)
    b = np.array([True, False, True])

    def build(x, k, b):
        c = ops()
        return [
            paddle.static.Print(x, summarize=2) * 2.0,  # the API's form, read by a later op
            c.print(k, 1, "ids", 3, False, True, True, False, False, "forward", True),
            c.print(b, -1, "", 1, True, False, False, False, False, "backward", True),
            c.npu_identity(x, -1), c.npu_identity(k, 3),  # the format is the NPU's: ignored on CPU
            c.memcpy(x, 0), c.memcpy(b, 0), c.memcpy_d2h(k, 0), c.memcpy_d2h(x * 3.0, 0),
        ]

    check(pir_program(tmp_path, build, {"x": x, "k": k, "b": b}), {"print", "npu_identity", "memcpy", "memcpy_d2h"},
          exact=True)


def _append_in_place(op_type: str, x, **inputs):
    """`op_type` writing X back into X's own var, as a legacy program does (what Paddle's depend and nop need)."""
    from paddle.base.layer_helper import LayerHelper

    LayerHelper(op_type).append_op(type=op_type, inputs={"X": [x], **inputs}, outputs={"Out": [x]})
    return x


def test_depend_nop(tmp_path):
    """The legacy form (Out is X) against Paddle; the PIR form, which Paddle Inference 3.3.1 cannot run (depend
    enforces that Out is X's var, nop leaves a new Out unallocated), against the same reference."""
    import paddle

    x = RNG.standard_normal((2, 3)).astype(np.float32)
    n = np.array([5, -9], np.int64)

    def legacy(x, n):
        # Paddle picks depend's kernel from every input, so Dep must share X's dtype
        scaled = _append_in_place("depend", paddle.scale(x, 2.0), Dep=[x, paddle.scale(x, 5.0)])
        shifted = _append_in_place("nop", paddle.scale(x, 1.0, 3.0))
        ids = _append_in_place("depend", paddle.scale(n, 3.0), Dep=[n])
        return [paddle.scale(scaled, 1.0, 1.0), shifted, ids]

    want = check(static_program(tmp_path / "legacy", legacy, {"x": x, "n": n}), {"depend", "nop"}, exact=True)

    def pir(x, n):
        c = ops()
        scaled = c.depend(paddle.scale(x, 2.0), [x, paddle.scale(x, 5.0)])
        return [paddle.scale(scaled, 1.0, 1.0), c.nop(paddle.scale(x, 1.0, 3.0)),
                c.depend(paddle.scale(n, 3.0), [n])]

    check(pir_program(tmp_path / "pir", pir, {"x": x, "n": n}, run_paddle=False), {"depend", "nop"},
          exact=True, want=want)


# -- ids to shards ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_shard_index(tmp_path, dtype):
    import paddle

    ids = np.array([[0], [5], [6], [9], [10], [13], [19]], dtype)
    cube = RNG.integers(0, 7, (2, 3, 1)).astype(dtype)

    def build(ids, cube):
        shard = paddle.shard_index
        return [shard(ids, 20, 2, 0), shard(ids, 20, 2, 1, ignore_value=-5),
                shard(ids, 20, 3, 2),  # 7 ids a shard: the last one is short
                shard(ids, 20, 30, 13),  # more shards than ids
                shard(cube, 7, 4, 1, ignore_value=100), shard(cube, 7, 1, 0)]

    check(pir_program(tmp_path, build, {"ids": ids, "cube": cube}), {"shard_index"})


# -- complex values -----------------------------------------------------------------------------------------
def test_angle_conj(tmp_path):
    import paddle

    edges = np.array([1.0, -1.0, 0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, -3.5, 2e-40], np.float32)
    re = RNG.standard_normal(10).astype(np.float32)
    k = np.array([3, -4], np.int32)

    def build(edges, re, k):
        z = paddle.complex(re, edges)
        w = paddle.complex(edges.astype("float64"), re.astype("float64") * 3.0)
        return [paddle.angle(edges), paddle.angle(edges.astype("float64")), paddle.angle(z), paddle.angle(w),
                paddle.as_real(paddle.conj(z)), paddle.imag(paddle.conj(w)), paddle.conj(k),
                paddle.conj(k.astype("int64")), paddle.conj(edges), paddle.conj(re.astype("float64"))]

    check(pir_program(tmp_path, build, {"edges": edges, "re": re, "k": k}), {"angle", "conj"})


# -- spectral norm ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spectral_norm(tmp_path, dtype):
    shapes = {"w2": (3, 5), "w3": (4, 2, 3), "w4": (3, 4, 2, 2), "w5": (2, 3, 1, 2, 2)}
    feeds = {name: RNG.standard_normal(shape).astype(dtype) for name, shape in shapes.items()}
    for name, shape in shapes.items():
        for dim in (0, 1):
            feeds[f"u_{name}_{dim}"] = RNG.standard_normal(shape[dim]).astype(dtype)
            feeds[f"v_{name}_{dim}"] = RNG.standard_normal(int(np.prod(shape)) // shape[dim]).astype(dtype)

    def build(**t):
        c = ops()
        outs = []
        for name, iters, eps in (("w2", 1, 1e-12), ("w3", 0, 1e-12), ("w4", 3, 1e-12), ("w5", 2, 0.5)):
            for dim in (0, 1):  # eps 0.5 shows where eps is added
                outs.append(c.spectral_norm(t[name], t[f"u_{name}_{dim}"], t[f"v_{name}_{dim}"], dim, iters, eps))
        return outs

    check(pir_program(tmp_path, build, feeds), {"spectral_norm"})


def test_spectral_norm_layer(tmp_path):
    """paddle.static.nn.spectral_norm: U and V are parameters (normal-initialized) in the saved .pdiparams."""
    import paddle

    w = RNG.standard_normal((4, 3, 2)).astype(np.float32)

    def build(w):
        return [paddle.static.nn.spectral_norm(w, dim=1, power_iters=4), paddle.static.nn.spectral_norm(w)]

    check(pir_program(tmp_path, build, {"w": w}), {"spectral_norm"})


# -- legacy weight dequantizers ------------------------------------------------------------------------------
def test_dequantize(tmp_path):
    import paddle

    q = np.array([[-128, -127, -1, 0], [1, 3, 100, 127]], np.int8)
    wide = np.array([-32768, -5, 0, 7, 32767], np.int32)  # Paddle Inference takes no int16 feed: cast inside
    scale = np.array([0.3, 9.0], np.float32)  # only the first value is read
    table = RNG.standard_normal(128).astype(np.float32)

    def build(q, wide, scale, table):
        c = ops()
        return [c.dequantize_abs_max(q, scale, 127.0), c.dequantize_abs_max(q, scale * 7.0, 3.0),
                c.dequantize_abs_max(q, scale, 0.0),  # +-inf, and NaN for 0
                c.dequantize_abs_max(paddle.cast(wide, "int16"), scale, 32767.0),
                c.dequantize_log(q, table)]

    check(pir_program(tmp_path, build, {"q": q, "wide": wide, "scale": scale, "table": table}),
          {"dequantize_abs_max", "dequantize_log"}, exact=True)


# -- fused softmax ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_softmax_mask(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((2, 3, 4, 6)) * 4).astype(dtype)
    x[1, 0, 2, 1] = np.inf  # an infinite logit: inf - inf makes its row NaN
    x[1, 1, 3, :] = 1000.0
    mask = np.where(RNG.random((2, 1, 4, 6)) < 0.3, -np.inf, 0.0).astype(dtype)
    mask[0, 0, 0, :] = -np.inf  # masked throughout: NaN
    mask[0, 0, 1, 0] = -1e4  # far below the row's max: exp(-64) / sum, not 0
    mask[1, 0, 1, :] = np.nan

    def build(x, mask):
        return [paddle.incubate.softmax_mask_fuse(x, mask), paddle.incubate.softmax_mask_fuse(x * 0.1, mask * 0.0)]

    # relative only: a probability of exp(-64) / sum must not pass for 0
    check(pir_program(tmp_path, build, {"x": x, "mask": mask}), {"fused_softmax_mask"}, atol=0.0, rtol=1e-5)


# -- fused binary + unary pairs (legacy programs) -------------------------------------------------------------
def _fused(op_type: str, x, y, functors, *, axis=-1, scale=0.0, save=False):
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(x.dtype)
    intermediate = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=op_type, inputs={"X": [x], "Y": [y]},
                     outputs={"Out": [out], "IntermediateOut": [intermediate]},
                     attrs={"functor_list": list(functors), "axis": axis, "scale": scale,
                            "save_intermediate_out": save})
    return [out, intermediate] if save else [out]


PAIRS = [("elementwise_add", "scale"), ("scale", "elementwise_add"), ("elementwise_add", "relu"),
         ("relu", "elementwise_add"), ("elementwise_mul", "scale"), ("tanh", "elementwise_add"),
         ("elementwise_mul", "tanh"), ("elementwise_mul", "sigmoid"), ("gelu", "elementwise_add")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_elemwise_activation(tmp_path, dtype):
    big = (RNG.standard_normal((2, 3, 4)) * 5).astype(dtype)
    big[0, 0, :] = [8.0, -30.0, 50.0, -50.0]  # past tanh's and sigmoid's clamps
    same = (RNG.standard_normal((2, 3, 4)) * 5).astype(dtype)
    same[0, 0, 0], same[0, 0, 1] = -np.inf, np.inf  # relu(-inf) is -inf * 0 = NaN in Paddle
    row = RNG.standard_normal((3, 4)).astype(dtype)
    mid = RNG.standard_normal((3, 1)).astype(dtype)  # trailing 1 dropped, placed at axis 1
    # a large factor times tanh / sigmoid of values past their clamps, so the clamps show beyond the tolerance
    wide = np.full((8,), 1e5, dtype)
    edge = np.array([8.0, 20.0, -8.0, -20.0, 0.5, np.nan, 13.5, -45.0], dtype)

    def build(big, same, row, mid, wide, edge):
        outs = [_fused("fused_elemwise_activation", wide, edge, ("elementwise_mul", unary))[0]
                for unary in ("tanh", "sigmoid")]
        for i, pair in enumerate(PAIRS):
            op_type = "fused_elemwise_add_activation" if i % 2 else "fused_elemwise_activation"
            outs += _fused(op_type, big, same, pair, scale=1.5, save=True)
            outs += _fused(op_type, big, row, pair, scale=-0.5, save=i % 3 == 0)
            outs += _fused(op_type, row, big, pair, scale=2.0, save=True)  # X the smaller one
            outs += _fused(op_type, big, mid, pair, axis=1, scale=3.0, save=True)
        return outs

    check(static_program(tmp_path, build, {"big": big, "same": same, "row": row, "mid": mid, "wide": wide,
                                           "edge": edge}),
          {"fused_elemwise_activation", "fused_elemwise_add_activation"})


# -- position encoding --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_position_encoding(tmp_path, dtype):
    feeds = {f"x{enc}": RNG.standard_normal((2, 7, enc)).astype(dtype) for enc in (2, 4, 16)}

    def build(x2, x4, x16):
        c = ops()
        return [c.add_position_encoding(x2, 1.0, 1.0), c.add_position_encoding(x4, 0.5, 2.0),
                c.add_position_encoding(x16, 0.3, -1.7), c.add_position_encoding(x16, 0.0, 1.0)]

    check(pir_program(tmp_path, build, feeds), {"add_position_encoding"})


# -- inputs Paddle's kernels reject ---------------------------------------------------------------------------
REJECTED = {
    # case: (legacy op, inputs, outputs, feeds, attrs, our message)
    "shard_index_out_of_range": ("shard_index", {"X": ["a"]}, {"Out": ["out"]},
                                 {"a": np.array([[3], [10]], np.int64)},
                                 {"index_num": 10, "nshards": 2, "shard_id": 0, "ignore_value": -1},
                                 "every id must be in \\[0, 10\\)"),
    "shard_id": ("shard_index", {"X": ["a"]}, {"Out": ["out"]}, {"a": np.array([[3]], np.int64)},
                 {"index_num": 10, "nshards": 2, "shard_id": 2, "ignore_value": -1}, "shard_id must be in"),
    "spectral_norm_dim": ("spectral_norm", {"Weight": ["w"], "U": ["u"], "V": ["v"]}, {"Out": ["out"]},
                          {"w": np.ones((2, 3, 4), np.float32), "u": np.ones(4, np.float32),
                           "v": np.ones(6, np.float32)}, {"dim": 2, "power_iters": 1, "eps": 1e-12},
                          "dim must be 0 or 1"),
    "fused_pair": ("fused_elemwise_activation", {"X": ["a"], "Y": ["b"]}, {"Out": ["out"]},
                   {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)},
                   {"functor_list": ["elementwise_sub", "relu"], "axis": -1, "scale": 0.0,
                    "save_intermediate_out": False}, "not a pair Paddle implements"),
    "softmax_mask_heads": ("fused_softmax_mask", {"X": ["a"], "Mask": ["b"]}, {"Out": ["out"]},
                           {"a": np.ones((1, 2, 3, 4), np.float32), "b": np.ones((1, 2, 3, 4), np.float32)}, {},
                           "Mask must be \\[batch, 1, query, key\\]"),
    "position_encoding_odd": ("add_position_encoding", {"X": ["a"]}, {"Out": ["out"]},
                              {"a": np.ones((1, 2, 3), np.float32)}, {"alpha": 1.0, "beta": 1.0}, "must be even"),
    "dequantize_log_short_dict": ("dequantize_log", {"X": ["a"], "Dict": ["d"]}, {"Out": ["out"]},
                                  {"a": np.array([1, 70], np.int8), "d": np.ones(64, np.float32)}, {},
                                  "Dict holds 64 values; X needs entry 70"),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_rejected(tmp_path, case):
    """Inputs Paddle refuses (its infermeta or kernel), or reads past the end of (dequantize_log's short Dict), are
    refused with a message naming what is wrong. Written as legacy OpDescs: PIR cannot build most of them."""
    op_type, inputs, outputs, feeds, attrs, message = REJECTED[case]
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs=outputs, attrs=attrs, feeds=feeds,
                           run_paddle=False)
    with pytest.raises(HostKernelError, match=message):
        run_on_host(saved)
