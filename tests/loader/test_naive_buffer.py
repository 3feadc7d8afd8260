"""The `.nb` reader and writer (nnadapter_bridge/loader/naive_buffer.py, naive_buffer_writer.py) on files Paddle
Lite 2.13's opt wrote (tests/support/paddlelite_env.py builds them once and caches them): both meta_versions,
byte-exact write-back, round trips of our own models, and every kind of damage giving a ModelFormatError that
names the file and the field (hand-made damage, then hypothesis mutations of real bytes)."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader import naive_buffer as nbr
from nnadapter_bridge.loader import naive_buffer_writer as nbw
from nnadapter_bridge.loader.program import BlockInfo, OpInfo, VarInfo
from support import paddlelite_env


def _side(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except paddlelite_env.SideEnvError as exc:  # never a silent skip: say what is missing
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def lite_nb():
    """lite_nb(name, meta_version1=False) -> path of the `.nb` Paddle Lite's opt made of a zoo model."""
    return lambda name, meta_version1=False: _side(paddlelite_env.ensure_zoo_nb, name, meta_version1)


@pytest.fixture(scope="session")
def small_nb_bytes(lite_nb):
    with open(lite_nb("yolo_detector"), "rb") as f:
        return f.read()


def _blanked(data: bytes) -> bytes:
    """The bytes opt leaves uninitialised after the opt version's NUL (0x0B-0x11 for 'v2.13-rc') zeroed."""
    head = bytearray(data[:nbr.HEADER_SIZE])
    end = head.index(0, 2)
    head[end:18] = bytes(18 - end)
    return bytes(head) + data[nbr.HEADER_SIZE:]


def test_opt_files_of_both_meta_versions_read_the_same(lite_nb):
    v2 = load_model(lite_nb("mobilenet_v1"))
    v1 = load_model(lite_nb("mobilenet_v1", meta_version1=True))
    with open(lite_nb("mobilenet_v1"), "rb") as f:
        head = f.read(nbr.HEADER_SIZE)
    assert (v2.format, v2.format_version, v1.format_version) == ("naive_buffer", 2, 1)
    assert head[2:2 + len(v2.opt_version)].decode() == v2.opt_version == "v2.13-rc"
    assert [op.type for op in v2.blocks[0].ops] == [op.type for op in v1.blocks[0].ops]
    assert sorted(v2.params) == sorted(v1.params) and len(v2.params) > 20
    for name, array in v2.params.items():
        np.testing.assert_array_equal(array, v1.params[name])
    # opt's leftovers are read and kept: the kernel choice and the fused activation
    conv = next(op for op in v2.blocks[0].ops if op.type == "conv2d")
    assert conv.attr("__@kernel_type_attr@__") == "conv2d/def/2/1/1" and conv.input("Bias")
    assert conv.attr("with_act") is True and conv.attr("act_type") == "relu"


@pytest.mark.parametrize("name", ["mobilenet_v2", "shufflenet_v2_x1_0", "yolo_detector"])
def test_writing_back_an_opt_file_gives_its_bytes(name, lite_nb):
    with open(lite_nb(name), "rb") as f:
        original = f.read()
    graph = load_model(lite_nb(name))
    written = nbw.graph_to_naive_buffer(graph, opt_version=graph.opt_version)
    assert written == _blanked(original)


@pytest.mark.parametrize("layout", ["pdmodel", "pir"])
def test_round_trip_of_our_models(layout, zoo_model, tmp_path):
    graph = load_model(zoo_model("shufflenet_v2_x1_0", layout))
    again = load_model(model_bytes=nbw.graph_to_naive_buffer(graph))
    assert again.format == "naive_buffer" and again.inputs == graph.inputs and again.outputs == graph.outputs
    ours = [(op.type, op.inputs, {k: v for k, v in op.attrs.items()}) for op in graph.blocks[0].ops]
    back = [(op.type, op.inputs, {k: v for k, v in op.attrs.items() if k != "__@kernel_type_attr@__"})
            for op in again.blocks[0].ops]
    assert len(ours) == len(back)
    for (t1, i1, a1), (t2, i2, a2) in zip(ours, back):
        assert (t1, i1) == (t2, i2)
        assert set(a1) <= set(a2)  # Lite's required attributes may be added (naive_buffer_writer._LITE_ATTRS)
        for key, value in a1.items():
            assert a2[key] == pytest.approx(value) if isinstance(value, float) else a2[key] == value, (t1, key)
    assert sorted(graph.params) == sorted(again.params)
    for name, array in graph.params.items():
        np.testing.assert_array_equal(np.asarray(array), again.params[name])


# -- damage -------------------------------------------------------------------------------------------------------
def _load_bytes(data: bytes):
    return load_model(model_bytes=data)


def _error(data: bytes) -> str:
    with pytest.raises(ModelFormatError) as info:
        _load_bytes(data)
    return str(info.value)


def _params_start(data: bytes) -> int:
    return nbr.HEADER_SIZE + struct.unpack_from("<Q", data, 18)[0]


def _file_error(tmp_path, data: bytes) -> str:
    path = tmp_path / "damaged.nb"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError) as info:
        load_model(str(path))
    message = str(info.value)
    assert str(path) in message  # the file is named
    return message


def test_header_damage(small_nb_bytes, tmp_path):
    data = small_nb_bytes
    assert "meta_version 0" in _error(b"\0\0" + data[2:])
    assert "meta_version 7" in _file_error(tmp_path, b"\7\0" + data[2:])
    assert "26-byte header" in _file_error(tmp_path, data[:20])
    forged = data[:18] + struct.pack("<Q", len(data)) + data[26:]
    assert "topo_size" in _error(forged)
    assert "opt_version" in _file_error(tmp_path, data[:2] + b"v" * 16 + data[18:])


def test_truncations_name_the_field(small_nb_bytes):
    data = small_nb_bytes
    start = _params_start(data)
    for cut in (30, start - 10, start + 3, start + 11, start + 20, len(data) - 1):
        message = _error(data[:cut])
        assert "truncated" in message or "outside" in message or "topo_size" in message, (cut, message)


def test_forged_params_framing(small_nb_bytes):
    data = bytearray(small_nb_bytes)
    start = _params_start(data)
    count_at, first = start + 6, start + 12
    forged = bytearray(data)
    struct.pack_into("<H", forged, count_at, struct.unpack_from("<H", data, count_at)[0] + 1)
    assert "record" in _error(bytes(forged))
    forged = bytearray(data)
    struct.pack_into("<I", forged, first, 0xFFFFFF00)
    assert "total_size" in _error(bytes(forged))
    forged = bytearray(data)
    struct.pack_into("<I", forged, first + 4, 3)
    assert "offset 3" in _error(bytes(forged))
    forged = bytearray(data)
    struct.pack_into("<H", forged, start, 1)
    assert "params_version 1" in _error(bytes(forged))
    fewer = bytearray(data)
    struct.pack_into("<H", fewer, count_at, struct.unpack_from("<H", data, count_at)[0] - 1)
    assert "no stored tensor" in _error(bytes(fewer))


def _tiny_blocks(attrs=None, attr_types=None):
    x = VarInfo("x", 7, np.dtype("float32"), 5, (1, 4), False, 0, False)
    w = VarInfo("w", 7, np.dtype("float32"), 5, (4,), True, 0, False)
    y = VarInfo("y", 7, np.dtype("float32"), 5, (1, 4), False, 0, False)
    feed = VarInfo("feed", 9, None, None, (), True, 0, False)
    fetch = VarInfo("fetch", 10, None, None, (), True, 0, False)
    ops = [OpInfo("feed", 0, 0, {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0}, {"col": 0}),
           OpInfo("elementwise_add", 1, 0, {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]},
                  attrs if attrs is not None else {"axis": -1}, attr_types if attr_types is not None else {"axis": 0}),
           OpInfo("fetch", 2, 0, {"X": ["y"]}, {"Out": ["fetch"]}, {"col": 0}, {"col": 0})]
    return [BlockInfo(0, -1, -1, ops, {v.name: v for v in (feed, fetch, x, w, y)})]


def test_param_data_size_and_unsorted_keys(monkeypatch):
    params = {"w": np.arange(4, dtype=np.float32)}
    good = nbw.write_naive_buffer(_tiny_blocks(), params)
    graph = _load_bytes(good)
    np.testing.assert_array_equal(graph.params["w"], params["w"])
    # the data vector's length no longer numel * 4: the dims [4] stay, one byte is claimed less
    blob_len = good.rindex(params["w"].tobytes())
    forged = bytearray(good)
    struct.pack_into("<I", forged, blob_len - 4, 15)
    assert "15 bytes for dims [4]" in _error(bytes(forged))
    # attributes written out of order: Paddle Lite's binary search would miss them, so the reader refuses
    monkeypatch.setattr(nbw, "sorted", lambda keys, key=None: list(keys)[::-1], raising=False)
    unsorted = nbw.write_naive_buffer(_tiny_blocks({"axis": -1, "x_num_col_dims": 1}, {"axis": 0, "x_num_col_dims": 0}),
                                      params)
    assert "not sorted" in _error(unsorted)


def test_flatbuffer_offsets_outside_the_buffer(small_nb_bytes):
    data = small_nb_bytes
    forged = bytearray(data)
    struct.pack_into("<I", forged, nbr.HEADER_SIZE, 0x7FFFFFF0)  # root offset
    assert "outside" in _error(bytes(forged))
    forged = bytearray(data)
    root = nbr.HEADER_SIZE + struct.unpack_from("<I", data, nbr.HEADER_SIZE)[0]
    struct.pack_into("<i", forged, root, -0x7FFFFFF)  # the root's vtable far past the end
    assert "vtable" in _error(bytes(forged))


def test_writer_limits():
    blocks = _tiny_blocks({"axis": -1, "v": object()}, {"axis": 0, "v": 13})
    with pytest.raises(nbw.NaiveBufferWriteError, match="VAR"):
        nbw.write_naive_buffer(blocks, {"w": np.zeros(4, np.float32)})
    many = [(f"p{k}", np.zeros(1, np.float32)) for k in range(nbw.MAX_PARAMS + 1)]
    with pytest.raises(nbw.NaiveBufferWriteError, match="at most 65535"):
        nbw.params_section(many)
    with pytest.raises(nbw.NaiveBufferWriteError, match="without a stored tensor"):
        nbw.write_naive_buffer(_tiny_blocks(), {})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_nb_bytes_raise_only_model_format_errors(small_nb_bytes, data):
    blob = bytearray(small_nb_bytes)
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice", "u32"]))
    if kind == "truncate":
        blob = blob[:data.draw(st.integers(0, len(blob) - 1))]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            at = data.draw(st.integers(0, len(blob) - 1))
            blob[at] = data.draw(st.integers(0, 255))
    elif kind == "splice":
        at = data.draw(st.integers(0, len(blob)))
        blob[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    else:  # a forged offset or length: a u32 rewritten at a 4-aligned spot of the program
        at = data.draw(st.integers(nbr.HEADER_SIZE, min(len(blob), 4096) - 4)) & ~3
        struct.pack_into("<I", blob, at, data.draw(st.sampled_from([0, 1, 4, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                                                     len(blob), len(blob) // 2])))
    try:
        _load_bytes(bytes(blob))
    except ModelFormatError:
        pass
