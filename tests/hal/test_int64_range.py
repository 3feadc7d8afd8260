"""int64 beyond the int32 range on every device (issue 32), against Paddle Inference.

Each case is a small Paddle program (PIR, paddle 3.3.1) on int64 values at 2^31 - 1, 2^31, 2^40, -2^40 and the int64
bounds where the op's Paddle semantics allow (arithmetic keeps its results inside int64), plus int32-range inputs whose
int64 results leave int32. The programs and Paddle's outputs are built once and cached (INT64_BUILD_ID).

On each device (builtin_device, intel_openvino, microsoft_onnxruntime) the outputs must equal Paddle's exactly, dtype
and shape included, wherever the op runs: OpenVINO's CPU plugin computes int64 as int32 (hal/intel_openvino/int64.py),
so there an op is declined, or a run-time check hands the part to the host; the answer must still be right. Where
Paddle raises (an index beyond the axis), every device must raise too.

The same programs on values within int32 must then run on intel_openvino with no op on the host (ON_OPENVINO): the
int64 paths the plugin keeps exact are not declined.
"""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import paddle_inference_run, pir_program
from support.fixture_cache import build_once
from support.model_zoo_fixtures import fixture_root

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
INT64_BUILD_ID = "int64-range-v5"  # bump when a case or its feeds change

I64 = np.iinfo(np.int64)
I32 = np.iinfo(np.int32)
WIDE = np.array([2**31 - 1, 2**31, 2**40, -(2**40), I64.min, I64.max, 7, -3], np.int64)
OTHER = np.array([2**31, 2**31, 3, -(2**40), 5, -7, 2**31 - 1, 2], np.int64)
# arithmetic: results stay inside int64
ADDEND = np.array([2**31 - 1, 2**31, 2**40, -(2**40), 2**62, -(2**62), 7, -3], np.int64)
ADDEND2 = np.array([1, 2**31, 3, -(2**40), -5, 7, 2**31 - 1, 2], np.int64)
FACTOR = np.array([2**31 - 1, 2**31, 2**40, -(2**40), 46341, 7, -3, 2**16], np.int64)
FACTOR2 = np.array([2, -2, 3, 1000, 46341, 2**31, 2**31 - 1, 2**16], np.int64)
DIVISOR = np.array([2, -(2**31), 3, 7, -5, 2**33, 2**31 - 1, 2], np.int64)
# within int32, with int64 results beyond it
NEAR = np.array([2**31 - 1, 2**30, -(2**31), 46341, -46341, 1, 0, 2**30 + 1], np.int64)
NEAR2 = np.array([1, 2**30, -1, 46341, 46341, 2**31 - 1, 0, 2**30], np.int64)
FLOATS = np.array([3e9, -3e9, 2.5, 1e12, -1e12, -7.9, 2**31, -(2**31) - 1e3], np.float32)


def _small(a: np.ndarray, nonzero: bool = False) -> np.ndarray:
    """`a` mapped into [-500, 500) (int64 kept): the same program on values within int32."""
    small = (np.asarray(a) % 1000 - 500).astype(a.dtype)
    return np.where(small == 0, 3, small).astype(a.dtype) if nonzero else small


def _cases():
    """name -> (build(**inputs) -> outputs, wide feeds, narrow feeds)."""
    import paddle

    def same(feeds, **narrow):
        return feeds, {k: narrow.get(k, _small(v)) for k, v in feeds.items()}

    def pair(a, b, nonzero_b=False):
        return same({"x": a, "y": b}, y=_small(b, nonzero_b))

    cases = {
        "greater_equal": (lambda x, y: paddle.greater_equal(x, y), *pair(WIDE, OTHER)),
        # odd positions differ from x in bit 32 only: equal in their low 32 bits
        "equal": (lambda x, y: paddle.equal(x, y), *pair(WIDE, np.where(np.arange(8) % 2 == 0, WIDE, WIDE ^ 2**32))),
        "not_equal": (
            lambda x, y: paddle.not_equal(x, y),
            *pair(WIDE, np.where(np.arange(8) % 2 == 0, WIDE, WIDE ^ 2**32)),
        ),
        "less_than": (lambda x, y: paddle.less_than(x, y), *pair(WIDE, OTHER)),
        "greater_equal_constant_2p40": (lambda x: x >= 2**40, *same({"x": WIDE})),
        "equal_constant_2p31": (lambda x: x == 2**31, *same({"x": WIDE})),
        "add": (lambda x, y: paddle.add(x, y), *pair(ADDEND, ADDEND2)),
        "subtract": (lambda x, y: paddle.subtract(x, y), *pair(ADDEND, ADDEND2)),
        "multiply": (lambda x, y: paddle.multiply(x, y), *pair(FACTOR, FACTOR2)),
        "floor_divide": (lambda x, y: paddle.floor_divide(x, y), *pair(WIDE, DIVISOR, True)),
        "remainder": (lambda x, y: paddle.remainder(x, y), *pair(WIDE, DIVISOR, True)),
        "maximum": (lambda x, y: paddle.maximum(x, y), *pair(WIDE, OTHER)),
        "minimum": (lambda x, y: paddle.minimum(x, y), *pair(WIDE, OTHER)),
        "abs": (lambda x: paddle.abs(x), *same({"x": ADDEND})),
        "pow_2": (
            lambda x: paddle.pow(x, 2),
            *same({"x": np.array([46341, -46341, 2**26, -3, 65536, 3037000], np.int64)}),
        ),
        # int32-range inputs whose int64 results leave int32
        "add_near_int32": (lambda x, y: paddle.add(x, y), *same({"x": NEAR, "y": NEAR2})),
        "multiply_near_int32": (lambda x, y: paddle.multiply(x, y), *same({"x": NEAR, "y": NEAR2})),
        "subtract_near_int32": (lambda x, y: paddle.subtract(x, y), *same({"x": NEAR, "y": -NEAR2})),
        "cumsum_near_int32": (lambda x: paddle.cumsum(x, axis=-1), *same({"x": NEAR})),
        "sum": (lambda x: paddle.sum(x, axis=-1), *same({"x": ADDEND.reshape(2, 4)})),
        # onnxruntime's ReduceSum adds int64 in double: 2 x (2^53 + 1) + 3 would come out 2^54 + 4
        "sum_beyond_2p53": (
            lambda x: paddle.sum(x, axis=-1),
            *same({"x": np.array([[2**53 + 1, 2**53 + 1, 3], [2**62, 2**61 + 1, 2**53 + 3]], np.int64)}),
        ),
        "sum_all_beyond_2p53": (
            lambda x: paddle.sum(x),
            *same({"x": np.array([[2**53 + 1, 2**53 + 1], [3, -(2**55) - 1]], np.int64)}),
        ),
        "prod": (
            lambda x: paddle.prod(x, axis=-1),
            *same({"x": np.array([[2**20, 2**20, 4, 1], [46341, 46341, 1, -1]], np.int64)}),
        ),
        "max": (lambda x: paddle.max(x, axis=-1), *same({"x": WIDE.reshape(2, 4)})),
        "min": (lambda x: paddle.min(x, axis=-1), *same({"x": WIDE.reshape(2, 4)})),
        "argmax": (lambda x: paddle.argmax(x, axis=-1), *same({"x": WIDE.reshape(2, 4)})),
        "argmin": (lambda x: paddle.argmin(x, axis=-1), *same({"x": WIDE.reshape(2, 4)})),
        "cumsum": (lambda x: paddle.cumsum(x, axis=-1), *same({"x": ADDEND})),
        "topk": (lambda x: list(paddle.topk(x, 3)), *same({"x": WIDE})),
        "argsort": (lambda x: paddle.argsort(x), *same({"x": WIDE})),
        "gather": (
            lambda x, i: paddle.gather(x, i),
            *same({"x": WIDE, "i": np.array([5, 0, 2, 3], np.int64)}, i=np.array([5, 0, 2, 3], np.int64)),
        ),
        "gather_index_2p32": (
            lambda x, i: paddle.gather(x, i),
            *same({"x": WIDE, "i": np.array([5, 2**32 + 1], np.int64)}, i=np.array([5, 1], np.int64)),
        ),
        "index_select": (
            lambda x, i: paddle.index_select(x, i),
            *same({"x": WIDE, "i": np.array([4, 5, 1], np.int64)}, i=np.array([4, 5, 1], np.int64)),
        ),
        "take_along_axis": (
            lambda x, i: paddle.take_along_axis(x, i, axis=1),
            *same(
                {"x": WIDE.reshape(2, 4), "i": np.array([[3, 0], [1, 1]], np.int64)},
                i=np.array([[3, 0], [1, 1]], np.int64),
            ),
        ),
        "gather_nd": (
            lambda x, i: paddle.gather_nd(x, i),
            *same(
                {"x": WIDE.reshape(2, 4), "i": np.array([[1, 1], [0, 1]], np.int64)},
                i=np.array([[1, 1], [0, 1]], np.int64),
            ),
        ),
        "scatter": (
            lambda x, i, u: paddle.scatter(x, i, u),
            *same(
                {"x": WIDE, "i": np.array([1, 6], np.int64), "u": np.array([2**40 + 1, -(2**33)], np.int64)},
                i=np.array([1, 6], np.int64),
            ),
        ),
        "arange": (
            lambda s, e: paddle.arange(s, e),
            *same(
                {"s": np.array(2**40, np.int64), "e": np.array(2**40 + 5, np.int64)},
                s=np.array(3, np.int64),
                e=np.array(8, np.int64),
            ),
        ),
        "full_like_2p40": (lambda x: paddle.full_like(x, 2**40) + x, *same({"x": OTHER})),
        "one_hot": (
            lambda x: paddle.nn.functional.one_hot(x, 5),
            *same({"x": np.array([1, 4, 0], np.int64)}, x=np.array([1, 4, 0], np.int64)),
        ),
        "cast_to_int32": (lambda x: x.astype("int32"), *same({"x": WIDE})),
        "cast_to_float32": (lambda x: x.astype("float32"), *same({"x": WIDE})),
        "cast_float32_to_int64": (lambda f: f.astype("int64"), *same({"f": FLOATS}, f=FLOATS / np.float32(1e7))),
        "cast_int32_to_int64": (
            lambda i: i.astype("int64") * 3,
            *same(
                {"i": np.array([2**31 - 1, -(2**31), 5, -3], np.int32)}, i=np.array([2**20, -(2**20), 5, -3], np.int32)
            ),
        ),
        "concat": (lambda x, y: paddle.concat([x, y]), *pair(WIDE, OTHER)),
        "reshape": (lambda x: paddle.reshape(x, [4, 2]), *same({"x": WIDE})),
        "transpose": (lambda x: paddle.transpose(x, [1, 0]), *same({"x": WIDE.reshape(2, 4)})),
        "slice": (lambda x: x[1:6], *same({"x": WIDE})),
        # one-sided clips: the open side's bound is float(int64 max / min), beyond int32 (LUKE's positions.clip(min=0))
        "clip_min_only": (lambda x: paddle.clip(x, min=0), *same({"x": WIDE})),
        "clip_max_only": (lambda x: paddle.clip(x, max=5), *same({"x": WIDE})),
        # ends beyond int32 (to the end): the plugin saturates them to 2^31 - 1, which keeps their meaning
        "slice_to_end": (lambda x: paddle.slice(x, [0], [2], [2**40]), *same({"x": WIDE})),
        "expand": (lambda x: paddle.expand(x, [3, 8]), *same({"x": WIDE.reshape(1, 8)})),
        "tile": (lambda x: paddle.tile(x, [2]), *same({"x": WIDE})),
        "where": (
            lambda c, x, y: paddle.where(c, x, y),
            *same({"c": np.arange(8) % 3 == 0, "x": WIDE, "y": OTHER}, c=np.arange(8) % 3 == 0),
        ),
        "stack": (lambda x, y: paddle.stack([x, y], axis=1), *pair(WIDE, OTHER)),
        "flip": (lambda x: paddle.flip(x, [0]), *same({"x": WIDE})),
        "unsqueeze_squeeze": (lambda x: paddle.squeeze(paddle.unsqueeze(x, [0, 2]), [0]), *same({"x": WIDE})),
        # shape arithmetic on constants folds before any device
        "shape_times_2p33": (lambda x: paddle.shape(x).astype("int64") * 2**33 + x[:1], *same({"x": WIDE})),
        # in-graph int64 values (top-k indices, within int32) scaled beyond it: RT-DETR's index arithmetic, larger
        "topk_index_times_2p33": (
            lambda f: paddle.topk(f, 3)[1] * 2**33 + 1,
            *same(
                {"f": np.array([0.5, 3.0, -1.0, 2.0, 7.0], np.float32)},
                f=np.array([0.5, 3.0, -1.0, 2.0, 7.0], np.float32),
            ),
        ),
    }
    return cases


# Cases whose ops must all run on intel_openvino on the narrow feeds (values within int32): the plugin keeps them exact.
ON_OPENVINO = {
    "greater_equal",
    "equal",
    "not_equal",
    "less_than",
    "add",
    "subtract",
    "multiply",
    "floor_divide",
    "remainder",
    "maximum",
    "minimum",
    "abs",
    "max",
    "min",
    "argmax",
    "argmin",
    "cumsum",
    # (topk is not here: a top_k of integer keys runs on the host kernel, which gives Paddle's order of equal keys)
    "gather",
    "index_select",
    "take_along_axis",
    "gather_nd",
    "cast_to_int32",
    "cast_to_float32",
    "cast_int32_to_int64",
    "concat",
    "reshape",
    "transpose",
    "slice",
    "slice_to_end",
    "clip_min_only",
    "clip_max_only",
    "expand",
    "tile",
    "where",
    "stack",
    "flip",
    "unsqueeze_squeeze",
    "one_hot",
    "add_near_int32",
    "multiply_near_int32",
    "subtract_near_int32",
    "cumsum_near_int32",
}


def _save(directory: str, name: str, array) -> None:
    np.save(os.path.join(directory, f"{name}.npy"), np.asarray(array), allow_pickle=False)


def _build_all(staging: str) -> str:
    """Every case as `<case>/model.json` with its feeds and Paddle's outputs for both feed sets (or Paddle's error)."""
    index = {}
    for name, (build, wide, narrow) in _cases().items():
        directory = os.path.join(staging, name)
        os.makedirs(directory)
        saved = pir_program(directory, build, narrow)
        record = {"model": os.path.relpath(saved.model_path, staging), "inputs": list(narrow), "outputs": {}}
        for which, feeds, outputs in (("narrow", narrow, saved.outputs), ("wide", wide, None)):
            for k, array in feeds.items():
                _save(directory, f"{which}_feed_{k}", array)
            if outputs is None:
                try:
                    outputs = paddle_inference_run(saved.model_path, saved.params_path, feeds)
                except Exception as exc:  # noqa: BLE001 - Paddle raises: every device must raise too
                    record["outputs"][which] = {"raises": str(exc).strip().splitlines()[-1][:300]}
                    continue
            for k, array in enumerate(outputs):
                _save(directory, f"{which}_want_{k}", array)
            record["outputs"][which] = {"count": len(outputs)}
        index[name] = record
    with open(os.path.join(staging, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
    return INT64_BUILD_ID + "\n"


@pytest.fixture(scope="module")
def programs():
    """(root, index): the cached programs (built on first use; Paddle 3.3.1)."""
    root = build_once(fixture_root(), INT64_BUILD_ID, _build_all)
    with open(os.path.join(root, "index.json"), encoding="utf-8") as f:
        return root, json.load(f)


def _load(root: str, name: str, prefix: str) -> dict:
    directory = os.path.join(root, name)
    found = {}
    for file in sorted(os.listdir(directory)):
        if file.startswith(prefix) and file.endswith(".npy"):
            found[file[len(prefix):-4]] = np.load(os.path.join(directory, file), allow_pickle=False)
    return found


def _predictor(root: str, record: dict, device: str):
    config = nb.Config()
    config.set_model_file(os.path.join(root, record["model"]))
    params = os.path.join(root, record["model"])[: -len(".json")] + ".pdiparams"
    if os.path.exists(params):
        config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    if device == "intel_openvino":
        config.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_PRECISION=f32")
    return nb.create_predictor(config)


def _run(predictor, feeds: dict) -> list:
    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(array)
    predictor.run()
    return [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]


def _assert_equal_to_paddle(got: list, root: str, name: str, which: str, device: str) -> None:
    want = _load(root, name, f"{which}_want_")
    assert len(got) == len(want), f"{name} on {device}: {len(got)} outputs, Paddle {len(want)}"
    for k, array in enumerate(got):
        expected = want[str(k)]
        what = f"{name} ({which} values) on {device}, output {k}"
        assert array.dtype == expected.dtype and array.shape == expected.shape, \
            f"{what}: {array.dtype}{list(array.shape)}, Paddle {expected.dtype}{list(expected.shape)}"
        np.testing.assert_array_equal(array, expected, err_msg=what)


CASE_NAMES = list(_cases())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_int64_beyond_int32_matches_paddle(programs, name, device):
    root, index = programs
    record = index[name]
    feeds = _load(root, name, "wide_feed_")
    predictor = _predictor(root, record, device)
    try:
        with warnings.catch_warnings():
            # intel_openvino hands a part holding int64 beyond int32 to the host at run time, with a warning
            warnings.simplefilter("ignore")
            if "raises" in record["outputs"]["wide"]:
                with pytest.raises(nb.BridgeError, match="indices|out of"):  # every device names the bad index
                    _run(predictor, feeds)
                return
            got = _run(predictor, feeds)
        _assert_equal_to_paddle(got, root, name, "wide", device)
    finally:
        predictor.close()


@pytest.mark.parametrize("name", CASE_NAMES)
def test_int64_within_int32_stays_on_openvino(programs, name):
    root, index = programs
    record = index[name]
    predictor = _predictor(root, record, "intel_openvino")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _run(predictor, _load(root, name, "narrow_feed_"))
        _assert_equal_to_paddle(got, root, name, "narrow", "intel_openvino")
        on_host = [f"{p.op.label()}: {p.reason}" for p in predictor.placements(per_device=False) if p.device is None]
        if name in ON_OPENVINO:
            assert not on_host, f"{name}: int64 within int32 must run on intel_openvino: {on_host}"
            assert not [w for w in caught if "failed" in str(w.message)], [str(w.message) for w in caught]
    finally:
        predictor.close()
