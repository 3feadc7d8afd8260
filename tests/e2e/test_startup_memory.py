"""Issue 14: what a start, a warm start and a run must not do, checked through behaviour and object identity
(never through timings or RSS figures, which depend on the machine).

* A warm start of the same model computes no op signature (the verdicts are recorded by op for that exact
  program), imports neither networkx nor the converters, and restores every program.
* A large `.nnc` that only this user can change is memory-mapped, checked in place, and OpenVINO imports its
  program from that memory (the driver keeps it): no copy of the weights; a file others may write is read.
* A compilation drops the converted model once the device holds its program; the OpenVINO driver exports
  its program only when the `.nnc` is written; the `.nnc` is written from pieces, never joined in memory.
* The params' resident pages are released once a device holds its copy; the arrays stay valid.
* The loader's fast op decoder gives exactly what the checked one gives.
"""
from __future__ import annotations

import glob
import json
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter import nnc
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.types import OperandType
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = np.random.default_rng(14).standard_normal((2, 4)).astype(np.float32)


def start(model, cache_dir, devices=("builtin_device",)):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(list(devices))
    config.set_nnadapter_model_cache_dir(str(cache_dir))
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc is written by a thread of its own after the first run
    return predictor


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model", extra_ops=["erf", "relu", "sigmoid"])


# -- support verdicts by op ------------------------------------------------------------------------------
def test_a_warm_start_of_the_same_program_computes_no_signature(model, tmp_path, monkeypatch):
    from nnadapter_bridge.subgraph.support_decisions import SupportDecider

    cache = tmp_path / "cache"
    first = start(model, cache)
    monkeypatch.setattr(SupportDecider, "signature", lambda self, op: pytest.fail("a signature was computed"))
    second = start(model, cache)
    assert second.support.conversions == 0
    assert [[op.index for op in s.ops] for s in second.partition.subgraphs] == \
        [[op.index for op in s.ops] for s in first.partition.subgraphs]
    assert [op.index for op in second.host_ops] == [op.index for op in first.host_ops]
    assert second.unsupported_reasons() == first.unsupported_reasons()
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())


def test_another_program_does_not_reuse_the_record(model, tmp_path):
    cache = tmp_path / "cache"
    start(model, cache)
    other = add_relu_scale_model(tmp_path / "other", extra_ops=["erf", "sigmoid", "relu"])
    again = start(other, cache)
    # Its signatures were all seen (same op types), so nothing converts; but they were looked up one by one.
    assert again.support.conversions == 0 and again.support.program_key is not None
    (path,) = glob.glob(os.path.join(str(cache), "support-*.json"))
    with open(path, encoding="utf-8") as f:
        assert len(json.load(f)["programs"]) == 2


def test_a_damaged_program_record_is_one_warning(model, tmp_path):
    cache = tmp_path / "cache"
    start(model, cache)
    (path,) = glob.glob(os.path.join(str(cache), "support-*.json"))
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    key = next(iter(document["programs"]))
    document["programs"][key]["ops"][0] = 3  # neither true, a reason nor null
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)
    with pytest.warns(nnc.NncCacheWarning, match="program record"):
        second = start(model, cache)
    assert second.support.restored == 0 and second.get_output(0).numpy().shape == (2, 4)


# -- what a warm start imports -------------------------------------------------------------------------------
def test_a_warm_start_imports_neither_networkx_nor_the_converters(tmp_path):
    model = add_relu_scale_model(tmp_path / "device_only", extra_ops=["relu", "sigmoid"])  # no host op
    cache = tmp_path / "cache"
    assert start(model, cache).stats.host_ops == 0
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        import numpy as np
        import nnadapter_bridge as nb
        config = nb.Config()
        config.set_model_file({str(model)!r})
        config.set_nnadapter_device_names(["builtin_device"])
        config.set_nnadapter_model_cache_dir({str(cache)!r})
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(np.ones((2, 4), np.float32))
        predictor.run()
        stats = predictor.stats
        assert stats.builds == 0 and stats.cache_hits_file == stats.subgraphs > 0, stats
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("networkx", "converters", "paddle"))
        print("LOADED", loaded)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LOADED []" in proc.stdout, proc.stdout


# -- the .nnc read in place --------------------------------------------------------------------------------
def _record_bytes(size: int) -> bytes:
    types = [OperandType(precision=Precision.FLOAT32, dims=(2, 4))]
    program = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    return nnc.pack_compilation_record(nnc.CompilationRecord(types, types, [
        nnc.ProgramRecord("builtin_device", types, [-1], types, [-1], program)]), nnc.CacheIdentity("t" * 32))


def test_a_large_cache_file_of_this_user_is_mapped_and_checked_in_place(tmp_path, monkeypatch):
    import mmap

    monkeypatch.setattr(nnc.files, "MAP_THRESHOLD", 0)
    path = tmp_path / "a.nnc"
    data = _record_bytes(100_000)
    path.write_bytes(data)
    os.chmod(path, 0o644)
    mapped = nnc.map_cache_file(str(path), 1 << 30, nnc.declared_container_size)
    assert isinstance(mapped, mmap.mmap) and mapped[:] == data
    record = nnc.read_nnc_file(str(path), ["builtin_device"], expect=nnc.CacheIdentity("t" * 32))
    program = record.programs[0]
    assert program.mapped is not None and program.mapped.flags.writeable
    assert program.mapped.tobytes() == bytes(program.model_buffer)
    program.mapped[0] ^= 0xFF  # copy-on-write: the file keeps its bytes
    assert path.read_bytes() == data
    os.chmod(path, 0o664)  # group-writable: someone else could change it under the map
    assert isinstance(nnc.map_cache_file(str(path), 1 << 30), bytes)
    record = nnc.read_nnc_file(str(path), ["builtin_device"], expect=nnc.CacheIdentity("t" * 32))
    assert record is not None and record.programs[0].mapped is None


def test_a_mapped_cache_file_still_fails_every_check(tmp_path, monkeypatch):
    monkeypatch.setattr(nnc.files, "MAP_THRESHOLD", 0)
    path = tmp_path / "a.nnc"
    data = bytearray(_record_bytes(50_000))
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    os.chmod(path, 0o644)
    with pytest.warns(nnc.NncCacheWarning, match="CRC"):
        assert nnc.read_nnc_file(str(path), ["builtin_device"], expect=nnc.CacheIdentity("t" * 32)) is None
    os.unlink(path)
    os.symlink("/dev/zero", path)
    with pytest.warns(nnc.NncCacheWarning, match="symbolic link"):
        assert nnc.read_nnc_file(str(path), ["builtin_device"]) is None


def test_openvino_imports_the_program_from_the_mapped_file(model, tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    monkeypatch.setattr(nnc.files, "MAP_THRESHOLD", 0)
    cache = tmp_path / "cache"
    first = start(model, cache, devices=("intel_openvino",))
    for path in glob.glob(os.path.join(str(cache), "*.nnc")):
        os.chmod(path, 0o644)
    second = start(model, cache, devices=("intel_openvino",))
    assert second.stats.builds == 0 and second.stats.cache_hits_file > 0
    handles = [program.compilation.programs[0].handle for engine in second.engines.values()
               for program in engine.programs]
    assert handles and all(h.blob_memory is not None for h in handles)
    for path in glob.glob(os.path.join(str(cache), "*.nnc")):  # the program keeps its map: the file may go
        os.unlink(path)
    twin = second.clone()
    for predictor in (second, twin):
        predictor.get_input(0).from_numpy(X)
        predictor.run()
        np.testing.assert_array_equal(predictor.get_output(0).numpy(), first.get_output(0).numpy())
    second.close()  # the original first: the clone still runs the shared compiled model
    twin.run()
    np.testing.assert_array_equal(twin.get_output(0).numpy(), first.get_output(0).numpy())
    twin.close()


# -- one copy of the weights -------------------------------------------------------------------------------
def test_a_compilation_drops_its_model_and_the_params_stay_readable(model, tmp_path):
    cache = tmp_path / "cache"
    predictor = start(model, cache)
    programs = [p for engine in predictor.engines.values() for p in engine.programs]
    assert programs and all(p.compilation.model is None for p in programs)
    assert glob.glob(os.path.join(str(cache), "*.nnc"))
    predictor.graph.release_param_pages()  # what the engine did: the arrays stay valid
    np.testing.assert_array_equal(predictor.graph.params["w"], np.linspace(-1.0, 1.0, 4).astype(np.float32))
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    assert predictor.get_output(0).numpy().shape == (2, 4)


def test_release_param_pages_keeps_mapped_params_valid(tmp_path):
    from nnadapter_bridge.loader import load_model

    big = np.arange(1 << 16, dtype=np.float32)  # large enough for the params file to be mapped
    directory = tmp_path / "m"
    path = add_relu_scale_model(directory, weight=big, feed_shape=(-1, big.size))
    graph = load_model(path)
    assert graph._param_maps, "the params file should be memory-mapped"
    before = graph.params["w"].copy()
    graph.release_param_pages()
    np.testing.assert_array_equal(graph.params["w"], before)
    predictor_config = nb.Config()
    predictor_config.set_model_file(path)
    predictor_config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(predictor_config)
    x = np.ones((1, big.size), np.float32)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x, big), rtol=1e-6)


def test_the_openvino_program_is_exported_when_the_nnc_is_written(model, tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    from hal.intel_openvino.driver import IntelOpenVinoDriver

    created = []
    real = IntelOpenVinoDriver.create_program

    def create_program(self, context, model_, cache):
        program = real(self, context, model_, cache)
        created.append((cache, len(cache.buffer), cache.exporter))
        return program

    monkeypatch.setattr(IntelOpenVinoDriver, "create_program", create_program)
    cache_dir = tmp_path / "cache"
    first = start(model, cache_dir, devices=("intel_openvino",))
    assert created and all(size == 0 and exporter is not None for _, size, exporter in created)
    assert all(c.exporter is None for c, _, _ in created)  # dropped once the .nnc was written
    second = start(model, cache_dir, devices=("intel_openvino",))
    assert second.stats.builds == 0 and second.stats.cache_hits_file == first.stats.builds


def test_container_pieces_are_the_values_themselves():
    value = bytes(range(256)) * 100
    entries = {"a": b"x", "big": value, "c": b"yz"}
    parts = nnc.pack_container_parts(entries)
    assert any(part is value for part in parts)
    joined = b"".join(parts)
    assert joined == nnc.pack_container(entries)
    assert nnc.unpack_container(joined) == {k: bytes(v) for k, v in entries.items()}
    for key in (b"k", b"another key"):
        with_mac = nnc.pack_compilation_record_parts(
            nnc.CompilationRecord([], [], [nnc.ProgramRecord("builtin_device", [], [], [], [], value)]),
            nnc.CacheIdentity("t" * 32), key)
        data = b"".join(with_mac)
        assert nnc.load_compilation_record(data, key=key, expect=nnc.CacheIdentity("t" * 32)) is not None


# -- the loader's fast path ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_fast_op_decoding_matches_the_checked_decoder(zoo_model, name):
    from nnadapter_bridge.loader import program_desc as program_module
    from nnadapter_bridge.loader.program_desc import parse_program_desc

    path = zoo_model(name, "pdmodel")
    with open(path, "rb") as f:
        desc = parse_program_desc(f.read(), path)
    for block_idx, bdesc in enumerate(desc.blocks):
        for index, odesc in enumerate(bdesc.ops):
            fast = program_module._decode_op_fast(odesc, index, block_idx)
            checked = program_module._decode_op_checked(odesc, index, block_idx, len(desc.blocks), path)
            for field in ("type", "index", "block_idx", "inputs", "outputs", "attrs", "attr_types", "is_target"):
                assert getattr(fast, field) == getattr(checked, field), (index, field)
                if field == "attrs":
                    assert {k: type(v) for k, v in fast.attrs.items()} == \
                        {k: type(v) for k, v in checked.attrs.items()}


def test_a_bad_name_still_gets_the_checked_decoders_error(tmp_path):
    from nnadapter_bridge.errors import ModelFormatError
    from nnadapter_bridge.loader import load_model

    path = add_relu_scale_model(tmp_path / "m")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data.replace(b"relu", b"re\x01u", 1))
    with pytest.raises(ModelFormatError, match="control character"):
        load_model(path)


def test_a_file_others_may_write_is_read_not_mapped(tmp_path, monkeypatch):
    monkeypatch.setattr(nnc.files, "MAP_THRESHOLD", 0)
    path = tmp_path / "a.nnc"
    path.write_bytes(_record_bytes(10_000))
    os.chmod(path, 0o646)
    assert os.stat(path).st_mode & stat.S_IWOTH
    assert isinstance(nnc.map_cache_file(str(path), 1 << 30), bytes)


# -- fingerprints remembered across starts -------------------------------------------------------------------
def _counting_fingerprints(monkeypatch):
    from nnadapter_bridge.subgraph import cache_key
    calls = []
    real = cache_key.subgraph_fingerprint

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_key, "subgraph_fingerprint", counting)
    return calls


def test_a_warm_start_does_not_hash_the_weights_again(model, tmp_path, monkeypatch):
    from nnadapter_bridge.subgraph.support_decisions import FingerprintMemo

    monkeypatch.setattr(FingerprintMemo, "RACY_NS", -(1 << 62))  # the test's params file is seconds old
    calls = _counting_fingerprints(monkeypatch)
    cache = tmp_path / "cache"
    first = start(model, cache)
    assert len(calls) == len(first.engines) > 0
    calls.clear()
    second = start(model, cache)
    assert calls == [] and second.stats.builds == 0 and second.stats.cache_hits_file == len(second.engines)
    assert second.cache_tokens() == first.cache_tokens()
    # Other weights in the same file name: another inode / size / times, so hashed again, another token.
    params = os.path.join(os.path.dirname(model), "model.pdiparams")
    weight = np.linspace(1.0, 2.0, 4).astype(np.float32)
    add_relu_scale_model(tmp_path / "model", weight=weight, extra_ops=["erf", "relu", "sigmoid"])
    assert os.path.isfile(params)
    third = start(model, cache)
    assert len(calls) == len(third.engines) and third.cache_tokens() != first.cache_tokens()


def test_no_fingerprint_is_remembered_with_an_integrity_key(model, tmp_path, monkeypatch):
    from nnadapter_bridge.subgraph.support_decisions import FingerprintMemo

    monkeypatch.setattr(FingerprintMemo, "RACY_NS", -(1 << 62))
    monkeypatch.setenv("NNADAPTER_BRIDGE_CACHE_KEY", "secret")
    calls = _counting_fingerprints(monkeypatch)
    cache = tmp_path / "cache"
    engines = len(start(model, cache).engines)
    start(model, cache)
    assert len(calls) == 2 * engines
    (path,) = glob.glob(os.path.join(str(cache), "support-*.json"))
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["fingerprints"] == {}


def test_a_fingerprint_of_a_file_changed_just_now_is_not_remembered(model, tmp_path, monkeypatch):
    calls = _counting_fingerprints(monkeypatch)
    cache = tmp_path / "cache"
    engines = len(start(model, cache).engines)
    start(model, cache)  # the params file was written a moment ago: its fingerprint is not trusted yet
    assert len(calls) == 2 * engines
