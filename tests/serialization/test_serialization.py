"""``fg.save`` / ``fg.load``: round trips, the documented format, and safe failures."""

from __future__ import annotations

import collections
import io
import json
import math
import os
import pickle
import struct
import sys
import zlib

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import serialization as S


def _roundtrip(obj):
    buf = io.BytesIO()
    fg.save(obj, buf)
    buf.seek(0)
    return fg.load(buf)


def _same_tensor(a, b) -> None:
    assert type(a) is type(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


# --- round trips ------------------------------------------------------------------------


def test_nested_containers_keep_types_keys_and_values():
    t32 = fg.randn(2, 3)
    t64 = fg.tensor([1.5, -2.0], dtype=fg.float64, requires_grad=True)
    obj = {
        "a": [t32, (t64, 3, 2.5, "text ✓", None, True, False)],
        "od": collections.OrderedDict([("z", 1), ("a", [])]),
        7: "int key",
        ("k", 1, None): {"nested": {"deeper": ()}},
        1.5: float("nan"),
        "inf": (float("inf"), -float("inf")),
        "big": 2**80,
        "dtype": fg.float64,
    }
    out = _roundtrip(obj)
    assert list(out) == list(obj)
    assert type(out["a"]) is list and type(out["a"][1]) is tuple
    _same_tensor(out["a"][0], t32)
    _same_tensor(out["a"][1][0], t64)
    assert out["a"][1][1:] == (3, 2.5, "text ✓", None, True, False)
    assert type(out["a"][1][1]) is int and type(out["a"][1][5]) is bool
    assert type(out["od"]) is collections.OrderedDict and list(out["od"]) == ["z", "a"]
    assert out[7] == "int key" and out[("k", 1, None)] == {"nested": {"deeper": ()}}
    assert math.isnan(out[1.5]) and out["inf"] == (math.inf, -math.inf)
    assert out["big"] == 2**80 and out["dtype"] is fg.float64


@pytest.mark.parametrize("dtype", [fg.float16, fg.float32, fg.float64, fg.int8, fg.int16,
                                   fg.int32, fg.int64, fg.uint8, fg.bool])
def test_every_dtype_and_odd_shapes(dtype):
    rng = np.random.default_rng(0)
    for shape in [(), (0,), (0, 3), (5,), (2, 3, 4)]:
        data = np.asarray(rng.normal(size=shape) * 50).astype(np.dtype(dtype))
        t = fg.from_numpy(data)
        _same_tensor(_roundtrip(t), t)
    view = fg.from_numpy((rng.normal(size=(3, 4)) * 50).astype(np.dtype(dtype))).t()
    _same_tensor(_roundtrip(view), fg.tensor(view.numpy()))  # non-contiguous input


def test_requires_grad_parameters_and_history():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3  # a non-leaf: loads as a leaf that requires grad (as in PyTorch)
    y.sum().backward()
    p = fg.nn.Parameter(fg.ones(2, 2))
    frozen = fg.nn.Parameter(fg.zeros(3), requires_grad=False)
    lx, ly, lp, lf = _roundtrip([x, y, p, frozen])
    _same_tensor(lx, x)
    assert lx.grad is None  # gradients are not saved
    assert ly.requires_grad and ly.is_leaf and ly.grad_fn is None
    np.testing.assert_array_equal(ly.detach().numpy(), [3.0, 6.0])
    _same_tensor(lp, p)
    _same_tensor(lf, frozen)
    assert repr(lp).startswith("Parameter containing:\ntensor(")


def test_loaded_tensors_own_writable_memory():
    t = fg.arange(4.0)
    out = _roundtrip(t)
    out[0] = 10.0
    out.add_(1)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and out.tolist() == [11.0, 2.0, 3.0, 4.0]


def test_sharing_one_object_twice_vs_aliases():
    t = fg.randn(3)
    a, b, c = _roundtrip([t, t, t.detach()])
    assert a is b  # the same object: stored once, loaded as one object
    assert c is not a  # a different tensor over the same memory: an independent copy
    a.zero_()
    assert c.abs().sum().item() > 0


def test_numpy_arrays_and_scalars():
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = _roundtrip({"arr": arr, "f": np.float64(0.25), "i": np.int64(4), "b": np.bool_(True)})
    assert type(out["arr"]) is np.ndarray and out["arr"].dtype == np.int32
    np.testing.assert_array_equal(out["arr"], arr)
    assert out["f"] == 0.25 and type(out["i"]) is int and out["b"] is True


def test_paths_and_file_objects(tmp_path):
    t = fg.randn(4, requires_grad=True)
    fg.save(t, str(tmp_path / "a.fg"))
    _same_tensor(fg.load(str(tmp_path / "a.fg")), t)
    fg.save({"t": t}, tmp_path / "b.fg")  # os.PathLike
    _same_tensor(fg.load(tmp_path / "b.fg")["t"], t)
    with open(tmp_path / "c.fg", "wb") as f:
        fg.save(t, f)
        fg.save("second", f)
    with open(tmp_path / "c.fg", "rb") as f:  # two objects read back one after the other
        _same_tensor(fg.load(f), t)
        assert fg.load(f, map_location="cpu", weights_only=True) == "second"


def test_file_matches_the_documented_layout():
    """A file built by hand from the module docstring's description loads."""
    data = np.array([[1, 2, 3]], dtype="<i4").tobytes()
    header = {"format": "fusegrad.save", "version": 1, "data_nbytes": len(data),
              "data_crc32": zlib.crc32(data),
              "tensors": [{"kind": "tensor", "dtype": "int32", "shape": [1, 3],
                           "requires_grad": False, "offset": 0, "nbytes": 12}],
              "root": {"type": "dict", "items": [[{"type": "str", "value": "x"},
                                                  {"type": "tensor", "index": 0}]]}}
    out = fg.load(io.BytesIO(_file(header, data)))
    assert out["x"].dtype == fg.int32 and out["x"].tolist() == [[1, 2, 3]]
    raw = fg.serialization.MAGIC
    written = io.BytesIO()
    fg.save(fg.ones(1), written)
    head = written.getvalue()
    assert head.startswith(raw) and struct.unpack("<I", head[12:16])[0] == 1
    hlen = struct.unpack("<Q", head[16:24])[0]
    assert (24 + hlen) % 64 == 0 and json.loads(head[24:24 + hlen])["format"] == "fusegrad.save"


# --- what cannot be saved ---------------------------------------------------------------


def test_unsupported_objects_are_refused_before_writing(tmp_path):
    Point = collections.namedtuple("Point", "x y")
    cyclic: list = []
    cyclic.append(cyclic)
    deep: list = []
    for _ in range(S.MAX_DEPTH + 1):
        deep = [deep]
    cases = [({"a": object()}, TypeError, r"obj\['a'\].*object"),
             ([Point(1, 2)], TypeError, r"obj\[0\].*Point"),
             ({1, 2}, TypeError, "set"),
             ({fg.ones(1): 1}, TypeError, "key"),
             (np.array([object()]), TypeError, "dtype object"),
             (cyclic, ValueError, "contains itself"),
             (deep, ValueError, "deep")]
    for obj, err, match in cases:
        path = tmp_path / "never.fg"
        with pytest.raises(err, match=match):
            fg.save(obj, path)
        assert not path.exists()
    assert _roundtrip(deep[0]) == deep[0]  # MAX_DEPTH levels are fine


# --- files that cannot be loaded ----------------------------------------------------------


def _file(header: dict, data: bytes = b"", version: int = 1) -> bytes:
    text = json.dumps(header).encode()
    return S.MAGIC + struct.pack("<IQ", version, len(text)) + text + data


def _good() -> bytes:
    buf = io.BytesIO()
    fg.save({"w": fg.randn(3, 4), "flags": fg.tensor([True, False])}, buf)
    return buf.getvalue()


def _load_error(raw: bytes, tmp_path, match: str):
    path = tmp_path / "bad.fg"
    path.write_bytes(raw)
    with pytest.raises(fg.SerializationError, match=match) as info:
        fg.load(path)
    assert str(path) in str(info.value)  # the message names the file
    assert isinstance(info.value, ValueError)
    return info.value


def test_truncated_files(tmp_path):
    raw = _good()
    hlen = struct.unpack("<Q", raw[16:24])[0]
    for cut in [0, 5, 13, 23, 30, 24 + hlen - 1, 24 + hlen + 7, len(raw) - 1]:
        _load_error(raw[:cut], tmp_path, "empty|truncated")


def test_garbage_and_foreign_files(tmp_path):
    rng = np.random.default_rng(1)
    _load_error(rng.bytes(200), tmp_path, "not a fusegrad file")
    _load_error(b"PK\x03\x04" + rng.bytes(50), tmp_path, "zip archive")
    npy = io.BytesIO()
    np.save(npy, np.ones(3))
    _load_error(npy.getvalue(), tmp_path, "np.load")
    _load_error(b"hello, world", tmp_path, "not a fusegrad file")


class _Exploit:
    def __reduce__(self):
        return (exec, ("import sys; sys._fusegrad_pwned = True",))


def test_a_pickle_is_refused_and_never_executed(tmp_path):
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        raw = pickle.dumps({"w": _Exploit()}, protocol=protocol)
        _load_error(raw, tmp_path, "pickle")
        with pytest.raises(fg.SerializationError, match="pickle"):
            fg.load(io.BytesIO(raw))
    assert not hasattr(sys, "_fusegrad_pwned")


def test_corrupted_data_and_wrong_version(tmp_path):
    raw = bytearray(_good())
    raw[-3] ^= 0xFF
    _load_error(bytes(raw), tmp_path, "corrupted.*CRC")
    good = _good()
    _load_error(good[:12] + struct.pack("<I", 99) + good[16:], tmp_path, "version 99")


def _entry(**kw):
    e = {"kind": "tensor", "dtype": "float32", "shape": [2], "requires_grad": False,
         "offset": 0, "nbytes": 8}
    e.update(kw)
    return e


def _header(entries=None, root=None, data=b"\0" * 8, **kw):
    h = {"format": "fusegrad.save", "version": 1, "data_nbytes": len(data),
         "data_crc32": zlib.crc32(data), "tensors": [_entry()] if entries is None else entries,
         "root": {"type": "tensor", "index": 0} if root is None else root}
    h.update(kw)
    return _file(h, data)


def test_malformed_headers(tmp_path):
    deep = '{"type":"list","items":[' * 5000 + "]}" * 5000
    cases = [
        (S.MAGIC + struct.pack("<IQ", 1, 5) + b"\xff\xfe{}}", "not UTF-8"),
        (S.MAGIC + struct.pack("<IQ", 1, 5) + b"{nope", "invalid JSON"),
        (S.MAGIC + struct.pack("<IQ", 1, 2) + b"[]", "not a JSON object"),
        (S.MAGIC + struct.pack("<IQ", 1, len(deep)) + deep.encode(), "nested too deeply"),
        (_header(format="other"), "'format'"),
        (_header(data_nbytes=-1), "data_nbytes"),
        (_header(data_nbytes=10**15), "truncated"),
        (_header(entries=[_entry(dtype="complex256")]), "unknown dtype"),
        (_header(entries=[_entry(kind="pyobject")]), "unknown kind"),
        (_header(entries=[_entry(shape=[-2])]), "invalid shape"),
        (_header(entries=[_entry(shape=[True])]), "invalid shape"),
        (_header(entries=[_entry(nbytes=4)]), "does not match shape"),
        (_header(entries=[_entry(offset=4)]), "outside"),
        (_header(entries=[_entry(shape=[10**12], nbytes=4 * 10**12)]), "outside"),
        (_header(entries=[_entry(dtype="int32", requires_grad=True)]), "requires_grad"),
        (_header(entries=[_entry(dtype="bool", shape=[8])], data=b"\2" * 8), "bool"),
        (_header(root={"type": "tensor", "index": 3}), "entry 3"),
        (_header(root={"type": "lambda"}), "unknown node type"),
        (_header(root={"type": "int", "value": "7"}), "invalid int"),
        (_header(root={"type": "float", "value": "1e5"}), "invalid float"),
        (_header(root={"type": "dict", "items": [[{"type": "list", "items": []},
                                                   {"type": "none"}]]}), "dict key"),
        (_header(root={"type": "dict", "items": [[1, 2, 3]]}), "pairs"),
        (_header(root=[1, 2]), "'type'"),
    ]
    for raw, match in cases:
        _load_error(raw, tmp_path, match)


def test_bad_arguments(tmp_path):
    path = tmp_path / "t.fg"
    fg.save(fg.ones(1), path)
    with pytest.raises(ValueError, match="map_location"):
        fg.load(path, map_location="cuda:0")
    with open(path, encoding="latin-1") as f, pytest.raises(TypeError, match="text mode"):
        fg.load(f)
    with pytest.raises(TypeError, match="path or a binary file"):
        fg.load(123)
    with pytest.raises(FileNotFoundError):
        fg.load(os.path.join(tmp_path, "missing.fg"))


def test_malformed_headers_with_impossible_sizes_are_serialization_errors(tmp_path):
    five_thousand_digits = S.MAGIC + struct.pack("<IQ", 1, 5012) + (
        b'{"format": ' + b"1" * 5000 + b"}")
    cases = [
        (_header(entries=[_entry(shape=[0, 10**30], nbytes=0)], data=b""), "too large"),
        (_header(entries=[_entry(shape=[0, 2**62, 2**62], nbytes=0)], data=b""), "too large"),
        (_header(entries=[_entry(shape=[0] * 65, nbytes=0)], data=b""), "65 dimensions"),
        (five_thousand_digits, "malformed header"),
    ]
    for raw, match in cases:
        err = _load_error(raw, tmp_path, match)
        assert type(err) is fg.SerializationError


def test_overlapping_entries_are_refused(tmp_path):
    """Every entry pointing at the same bytes would make a small file load as many
    copies of them (memory far beyond the file's size)."""
    data = b"\0" * 8
    entries = [_entry() for _ in range(3)]
    root = {"type": "list", "items": [{"type": "tensor", "index": i} for i in range(3)]}
    _load_error(_header(entries=entries, root=root, data=data), tmp_path, "overlap")
    half = [_entry(shape=[1], nbytes=4, offset=0), _entry(shape=[2], nbytes=8, offset=0)]
    _load_error(_header(entries=half, root=root | {"items": root["items"][:2]}, data=data),
                tmp_path, "overlap")


def test_load_reads_disjoint_entries_in_any_order(tmp_path):
    a, b = np.arange(4, dtype=np.float32), np.arange(2, dtype=np.float32) + 10
    data = b.tobytes() + bytes(56) + a.tobytes()
    entries = [_entry(shape=[4], nbytes=16, offset=64), _entry(shape=[2], nbytes=8, offset=0),
               _entry(shape=[0, 3], nbytes=0, offset=72)]
    root = {"type": "list", "items": [{"type": "tensor", "index": i} for i in range(3)]}
    path = tmp_path / "ok.fg"
    path.write_bytes(_header(entries=entries, root=root, data=data))
    x, y, z = fg.load(path)
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(y.numpy(), b)
    assert z.shape == (0, 3)
    x.numpy()[0] = 5.0  # own, writable memory, not a view of another entry
    assert y.numpy()[0] == 10


def test_load_needs_about_the_file_size_in_memory(tmp_path):
    """A 64 MB array loads with about 64 MB of new memory (read straight into the
    result, not via a copy of the file's bytes)."""
    import tracemalloc

    path = tmp_path / "big.fg"
    fg.save(np.ones(8 << 20), path)
    tracemalloc.start()
    try:
        out = fg.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (8 << 20,) and out[-1] == 1.0
    assert peak < 1.25 * (64 << 20), peak


def test_load_from_a_stream_without_seek_or_readinto():
    class Stream:
        def __init__(self, raw):
            self.buf = io.BytesIO(raw)

        def read(self, n=-1):
            return self.buf.read(n)

    buf = io.BytesIO()
    fg.save({"a": fg.arange(10.0), "b": fg.ones(3, 3)}, buf)
    out = fg.load(Stream(buf.getvalue()))
    np.testing.assert_array_equal(out["a"].numpy(), np.arange(10.0, dtype=np.float32))
    np.testing.assert_array_equal(out["b"].numpy(), np.ones((3, 3), np.float32))


def test_save_to_a_path_is_atomic(tmp_path, monkeypatch):
    """A failure while writing leaves the previous file intact and no temporary file."""
    path = tmp_path / "ckpt.fg"
    fg.save({"step": 1}, path)
    before = path.read_bytes()

    def boom(fh, header, enc):
        fh.write(header[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(S, "_write", boom)
    with pytest.raises(OSError, match="No space"):
        fg.save({"step": 2, "w": fg.ones(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.fg"]
    fg.save({"step": 3}, path)
    assert fg.load(path) == {"step": 3}
    assert os.listdir(tmp_path) == ["ckpt.fg"]


def test_save_to_a_path_fsyncs_before_replacing(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append("fsync")
        real_fsync(fd)

    def replace(a, b):
        calls.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    fg.save(fg.ones(2), tmp_path / "x.fg")
    assert calls[:2] == ["fsync", "replace"]
