"""microsoft_onnxruntime runs a transformer's self-attention as onnxruntime's fused Attention kernel
(hal/microsoft_onnxruntime/attention.py): the twenty-odd operations per layer that Paddle's encoders write
(ERNIE, BERT, UIE: `paddle.nn.TransformerEncoderLayer` and paddlenlp's hand-written form with a clamp at float32's
lowest value) become one node, with Paddle Inference's answers. Where a value inside the pattern is read elsewhere,
or the clamp would matter (a mask that can reach -inf), the layer runs op by op, with Paddle's answer too.

The fused count is read off the driver (a spy on its emitter): the answers alone cannot tell the two forms apart.
"""
from __future__ import annotations

import numpy as np
import pytest

import hal.microsoft_onnxruntime.driver as onnxruntime_driver
import nnadapter_bridge as nb
from support.converter_harness import paddle_inference_run, save_declared
from support.tolerances import assert_model_close

HIDDEN, HEADS, VOCAB = 32, 4, 50


def _ids(batch, length, seed, padded=3):
    ids = np.random.default_rng(seed).integers(1, VOCAB, (batch, length)).astype(np.int64)
    ids[:, length - padded:] = 0  # padding: the mask hides these keys
    return ids


def _padding_mask(ids):
    """paddlenlp's: -1e4 on the padded keys, [batch, 1, 1, keys]."""
    return ((ids == 0).astype("float32") * -1e4).unsqueeze([1, 2])


def _encoder_layers(ids):
    """ERNIE's encoder: paddle.nn.TransformerEncoder over embeddings, the padding mask added to the scores."""
    import paddle

    x = paddle.nn.Embedding(VOCAB, HIDDEN)(ids)
    layer = paddle.nn.TransformerEncoderLayer(HIDDEN, HEADS, 64, dropout=0.1, activation="gelu")
    encoder = paddle.nn.TransformerEncoder(layer, 2)
    encoder.eval()
    return paddle.tanh(encoder(x, _padding_mask(ids))[:, 0])


def _attention(x, mask, *, clamp=True, keys_pre_transposed=False, bias=True, probabilities_out=False):
    """A hand-written self-attention as paddlenlp writes it: the scale on the queries, the mask added, a clamp at
    float32's lowest value, softmax, the heads merged."""
    import paddle

    head = HIDDEN // HEADS
    q, k, v = (paddle.nn.Linear(HIDDEN, HIDDEN, bias_attr=None if bias else False)(x) for _ in range(3))
    q, k, v = (t.reshape([0, 0, HEADS, head]) for t in (q, k, v))
    q, v = q.transpose([0, 2, 1, 3]), v.transpose([0, 2, 1, 3])
    q = q * head ** -0.5
    if keys_pre_transposed:
        scores = paddle.matmul(q, k.transpose([0, 2, 3, 1]))
    else:
        scores = paddle.matmul(q, k.transpose([0, 2, 1, 3]), transpose_y=True)
    if mask is not None:
        scores = scores + mask
    if clamp:
        scores = paddle.maximum(scores, paddle.full([1], float(np.finfo(np.float32).min), "float32"))
    probabilities = paddle.nn.functional.softmax(scores, axis=-1)
    out = paddle.matmul(probabilities, v).transpose([0, 2, 1, 3]).reshape([0, 0, HIDDEN])
    out = paddle.nn.Linear(HIDDEN, HIDDEN)(out) + x
    return [out, probabilities] if probabilities_out else out


def _hand_written(ids, **options):
    import paddle

    x = paddle.nn.Embedding(VOCAB, HIDDEN)(ids)
    return _attention(x, _padding_mask(ids), **options)


def _float_mask(x, mask):
    """The mask is a float input: nothing bounds it, -inf included."""
    return _attention(x, mask.unsqueeze([1, 2]))


def _float_mask_unclamped(x, mask):
    return _attention(x, mask.unsqueeze([1, 2]), clamp=False)


IDS = {"ids": [-1, -1]}
SIZES = ((1, 16, 1), (2, 7, 2))  # (batch, length, seed): 16 keys get the softmax converter's clamp, 7 do not
MODELS = {
    # name: (build, declared inputs, dtypes, attentions fused over the two sizes)
    "encoder": (_encoder_layers, IDS, {"ids": "int64"}, 4),
    "hand_written": (_hand_written, IDS, {"ids": "int64"}, 2),
    "keys_pre_transposed": (lambda ids: _hand_written(ids, keys_pre_transposed=True), IDS, {"ids": "int64"}, 2),
    "no_bias_no_clamp": (lambda ids: _hand_written(ids, bias=False, clamp=False), IDS, {"ids": "int64"}, 2),
    # the probabilities are read outside the attention: op by op
    "probabilities_fetched": (lambda ids: _hand_written(ids, probabilities_out=True), IDS, {"ids": "int64"}, 0),
    # a float mask can hold -inf: with a clamp (the model's, or the converter's at 16 keys) the layer runs op by op,
    # which keeps Paddle's 1 / n for a row with every key hidden; without one (7 keys) Paddle's row is NaN, as the
    # kernel's
    "float_mask_clamped": (_float_mask, {"x": [-1, -1, HIDDEN], "mask": [-1, -1]}, {}, 0),
    "float_mask_unclamped": (_float_mask_unclamped, {"x": [-1, -1, HIDDEN], "mask": [-1, -1]}, {}, 1),
}


def _feeds(name, batch, length, seed):
    if "x" in MODELS[name][1]:
        rng = np.random.default_rng(seed)
        mask = np.where(rng.random((batch, length)) < 0.3, -np.inf, 0.0).astype(np.float32)
        mask[0, :] = -np.inf  # every key hidden for the first sequence
        return {"x": rng.standard_normal((batch, length, HIDDEN)).astype(np.float32), "mask": mask}
    return {"ids": _ids(batch, length, seed)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    programs = {}
    for name, (build, declared, dtypes, _) in MODELS.items():
        programs[name] = save_declared(tmp_path_factory.mktemp(name), build, declared, dtypes=dtypes)
    return programs


@pytest.fixture
def fused_count(monkeypatch):
    emitted = []
    emit = onnxruntime_driver.emit_attention

    def counting(g, chain):
        emitted.append(chain.heads)
        return emit(g, chain)

    monkeypatch.setattr(onnxruntime_driver, "emit_attention", counting)
    return emitted


@pytest.mark.parametrize("name", list(MODELS))
def test_self_attention_runs_as_one_kernel_with_paddles_answer(saved, fused_count, name):
    model, params = saved[name]
    config = nb.Config()
    config.set_model_file(model)
    config.set_param_file(params)
    config.set_nnadapter_device_names(["microsoft_onnxruntime"])
    predictor = nb.create_predictor(config)
    assert predictor.host_ops == []
    for batch, length, seed in SIZES:  # a program each
        feeds = _feeds(name, batch, length, seed)
        for key, value in feeds.items():
            predictor.get_input_by_name(key).from_numpy(value)
        predictor.run()
        want = paddle_inference_run(model, params, feeds)
        for k, expected in enumerate(want):
            got = predictor.get_output(k).numpy()
            what = f"{name} output {k} at {batch}x{length}"
            assert got.shape == expected.shape, what
            # NaN exactly where Paddle's is (a row of -inf scores without a clamp), Paddle's values elsewhere
            assert np.array_equal(np.isnan(got), np.isnan(expected)), what
            assert np.isnan(expected).any() == (name.startswith("float_mask_un") and length % 8 != 0), what
            finite = ~np.isnan(expected)
            assert_model_close(got[finite], expected[finite], what=what)
    assert fused_count == [HEADS] * MODELS[name][3], fused_count
