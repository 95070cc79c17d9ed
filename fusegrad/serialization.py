"""``fg.save(obj, f)`` / ``fg.load(f)``: tensors and nested containers, without pickle.

Loading never runs code: the file holds a JSON description of the object and
raw array bytes, and ``load`` only rebuilds the handful of types listed below.
Anything else in a file (a pickle, a zip from ``torch.save``, a truncated or
corrupted file) raises ``SerializationError`` naming the file and the problem.

>>> import io, fusegrad as fg
>>> buf = io.BytesIO()
>>> fg.save({"w": fg.ones(2, requires_grad=True), "step": 3}, buf)
>>> _ = buf.seek(0)
>>> fg.load(buf)
{'w': tensor([1., 1.], requires_grad=True), 'step': 3}

What can be saved: ``fg.Tensor`` (dtype, shape, values, ``requires_grad``; an
``nn.Parameter`` stays a Parameter; ``.grad`` and the autograd history are not
saved, so a non-leaf tensor loads as a leaf, as in PyTorch), NumPy arrays of
the Tensor dtypes, ``dict``, ``collections.OrderedDict``, ``list``, ``tuple``,
``str``, ``int``, ``float``, ``bool``, ``None`` and fusegrad dtypes. Dict keys
may be ``str``, ``int``, ``float``, ``bool``, ``None`` or tuples of them.
Other types (subclasses such as namedtuples included) are a ``TypeError`` at
save time rather than a silent change of type. Containers nest at most
``MAX_DEPTH`` deep; a container that contains itself is a ``ValueError``.

Sharing: the same Tensor object saved twice in one call is stored once and
loads as one object. Distinct tensors that share memory (``x`` and
``x.detach()``, tied weights in a ``state_dict``, views) are stored
separately and load as independent copies (PyTorch keeps that sharing).

Saving to a path is atomic: the file is written next to the target, flushed and
fsynced, then renamed over it, so an interrupted save leaves the old file.
Loading reads each array straight from the file into its own new array, so it
needs about the file's size in memory; entries whose bytes overlap (never
written by ``fg.save``; they would let a small file expand into many copies)
and shapes no array can have are a ``SerializationError``.

File format (version 1), all integers little-endian:

============  =====  ======================================================
offset        bytes  content
============  =====  ======================================================
0             12     magic ``b"\\x89FGSAVE\\r\\n\\x1a\\n\\x00"``
12            4      format version, uint32 (1)
16            8      header length H, uint64 (the header is padded with
                     spaces so that the data starts at a multiple of 64)
24            H      header: UTF-8 JSON object (below)
24 + H        D      data: the arrays' bytes, little-endian, C order, each
                     starting at a multiple of 64 (zero padding between)
============  =====  ======================================================

The header is ``{"format": "fusegrad.save", "version": 1, "data_nbytes": D,
"data_crc32": <zlib.crc32 of the data>, "tensors": [...], "root": node}``.
Each entry of ``tensors`` is ``{"kind": "tensor" | "parameter" | "ndarray",
"dtype": "float32", "shape": [2, 3], "requires_grad": false, "offset": 0,
"nbytes": 24}`` (``offset`` from the start of the data). A ``node`` is
``{"type": T, ...}`` with ``T`` one of ``none``; ``bool``, ``int``, ``str``,
``dtype`` with a ``value``; ``float`` with a numeric ``value`` or one of
``"nan"``, ``"inf"``, ``"-inf"``; ``list``, ``tuple`` with ``items`` (nodes);
``dict``, ``ordereddict`` with ``items`` (``[key node, value node]`` pairs);
``tensor`` with the ``index`` of its entry in ``tensors``.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import math
import os
import struct
import zlib

import numpy as np

from .eager import dtypes as D
from .eager import tensor_base as TB
from .ir.errors import FusegradError

__all__ = ["MAX_DEPTH", "SerializationError", "load", "save"]

MAGIC = b"\x89FGSAVE\r\n\x1a\n\x00"
VERSION = 1
FORMAT = "fusegrad.save"
ALIGN = 64
#: How deep containers may nest (keeps encoding and JSON parsing far from Python's
#: recursion limit).
MAX_DEPTH = 100
_PRELUDE = struct.Struct("<IQ")
_CHUNK = 1 << 24
_DTYPES = dict(D._BY_NAME)
_SUPPORTED = ("Tensors, NumPy arrays, dict, OrderedDict, list, tuple, str, int, float, bool, "
              "None and fusegrad dtypes")


class SerializationError(FusegradError, ValueError):
    """A file ``fg.load`` cannot read: not a fusegrad file, truncated or corrupted."""


# --- save -------------------------------------------------------------------------------


class _Encoder:
    """Turns an object into a JSON node tree plus the list of arrays to store."""

    def __init__(self):
        self.entries: list[dict] = []
        self.arrays: list[np.ndarray] = []
        self.memo: dict[int, int] = {}
        self.keep: list = []  # keeps memoised objects alive so their ids stay unique
        self.active: set[int] = set()
        self.nbytes = 0

    def node(self, obj, path: str, depth: int) -> dict:
        if depth > MAX_DEPTH:
            raise ValueError(f"fg.save: {path} nests containers more than {MAX_DEPTH} deep")
        if obj is None:
            return {"type": "none"}
        if isinstance(obj, bool | np.bool_):
            return {"type": "bool", "value": bool(obj)}
        if isinstance(obj, int | np.integer):
            return {"type": "int", "value": int(obj)}
        if isinstance(obj, float | np.floating):
            v = float(obj)
            return {"type": "float", "value": v if math.isfinite(v) else repr(v)}
        if isinstance(obj, str):
            return {"type": "str", "value": obj}
        if isinstance(obj, D.dtype):
            return {"type": "dtype", "value": obj._name}
        if isinstance(obj, TB.TensorBase | np.ndarray):
            return {"type": "tensor", "index": self.array(obj, path)}
        kind = {list: "list", tuple: "tuple", dict: "dict",
                collections.OrderedDict: "ordereddict"}.get(type(obj))
        if kind is None:
            raise TypeError(f"fg.save: cannot save {path}, an object of type "
                            f"{type(obj).__module__}.{type(obj).__qualname__}; fg.save stores "
                            f"{_SUPPORTED} (never pickles)")
        if id(obj) in self.active:
            raise ValueError(f"fg.save: {path} contains itself (a reference cycle)")
        self.active.add(id(obj))
        try:
            if kind in ("list", "tuple"):
                items = [self.node(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj)]
            else:
                items = [[self.key(k, path), self.node(v, f"{path}[{k!r}]", depth + 1)]
                         for k, v in obj.items()]
        finally:
            self.active.discard(id(obj))
        return {"type": kind, "items": items}

    def key(self, k, path: str) -> dict:
        if isinstance(k, tuple) and type(k) is tuple:
            return {"type": "tuple", "items": [self.key(v, path) for v in k]}
        if k is None or isinstance(k, bool | int | float | str | np.bool_ | np.integer
                                   | np.floating):
            return self.node(k, path, 0)
        raise TypeError(f"fg.save: {path} has a key {k!r} of type {type(k).__name__}; dict keys "
                        "must be str, int, float, bool, None or tuples of them")

    def array(self, obj, path: str) -> int:
        if id(obj) in self.memo:
            return self.memo[id(obj)]
        if isinstance(obj, TB.TensorBase):
            data = obj._concrete(f"fg.save of {path}")
            kind = "parameter" if _is_parameter(obj) else "tensor"
            rg = obj.requires_grad
        else:
            data, kind, rg = obj, "ndarray", False
        if data.dtype.newbyteorder("=") not in D._BY_NP:
            raise TypeError(f"fg.save: {path} has dtype {data.dtype}, which fusegrad cannot "
                            f"store (supported: {', '.join(_DTYPES)})")
        arr = np.asarray(data, dtype=data.dtype.newbyteorder("<"), order="C")
        offset = -(-self.nbytes // ALIGN) * ALIGN
        name = D.from_numpy_dtype(arr.dtype.newbyteorder("="))._name
        self.entries.append({"kind": kind, "dtype": name,
                             "shape": list(arr.shape), "requires_grad": bool(rg),
                             "offset": offset, "nbytes": arr.nbytes})
        self.arrays.append(arr)
        self.nbytes = offset + arr.nbytes
        self.memo[id(obj)] = len(self.entries) - 1
        self.keep.append(obj)
        return len(self.entries) - 1

    def chunks(self):
        """The data section, piece by piece (padding and array bytes)."""
        pos = 0
        for entry, arr in zip(self.entries, self.arrays):
            if entry["offset"] > pos:
                yield bytes(entry["offset"] - pos)
            yield memoryview(arr.reshape(-1).view(np.uint8))
            pos = entry["offset"] + entry["nbytes"]


def _is_parameter(t) -> bool:
    from .nn.parameter import Parameter

    return isinstance(t, Parameter)


def save(obj, f) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object) in fusegrad's format.

    ``obj`` is a Tensor, a NumPy array or a nest of dict / OrderedDict / list /
    tuple with str / int / float / bool / None leaves (see the module docstring
    for what is kept and the file layout). Unsupported types raise ``TypeError``
    before anything is written.
    """
    enc = _Encoder()
    root = enc.node(obj, "obj", 0)
    crc = 0
    for chunk in enc.chunks():
        crc = zlib.crc32(chunk, crc)
    header = {"format": FORMAT, "version": VERSION, "data_nbytes": enc.nbytes,
              "data_crc32": crc, "tensors": enc.entries, "root": root}
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("ascii")
    start = len(MAGIC) + _PRELUDE.size
    text += b" " * (-(start + len(text)) % ALIGN)
    if isinstance(f, str | os.PathLike):
        _save_atomic(os.fspath(f), text, enc)
    else:
        _write(f, text, enc)


def _save_atomic(path: str, header: bytes, enc: _Encoder) -> None:
    """Write a new file next to ``path``, flush and fsync it, then rename it over ``path``:
    a crash or a full disk leaves the old file intact, never a truncated one."""
    directory, base = os.path.split(os.path.abspath(path))
    while True:
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:  # O_EXCL: never an existing file or symlink; 0o666 & ~umask, as open() would
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            _write(fh, header, enc)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        with contextlib.suppress(OSError):
            dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


def _write(fh, header: bytes, enc: _Encoder) -> None:
    fh.write(MAGIC)
    fh.write(_PRELUDE.pack(VERSION, len(header)))
    fh.write(header)
    for chunk in enc.chunks():
        fh.write(chunk)


# --- load -------------------------------------------------------------------------------


def _name(f) -> str:
    if isinstance(f, str | os.PathLike):
        return repr(os.fspath(f))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__}>"


class _Reader:
    def __init__(self, fh, name: str):
        self.fh = fh
        self.name = name
        self.pos = 0

    def fail(self, what: str):
        return SerializationError(f"fg.load({self.name}): {what}")

    def read(self, n: int, what: str) -> bytes:
        """Exactly ``n`` bytes, read in chunks (a forged length cannot allocate much)."""
        parts, got = [], 0
        while got < n:
            part = self.fh.read(min(_CHUNK, n - got))
            if not part:
                raise self.fail(f"the file is truncated: {what} needs {n} bytes at offset "
                                f"{self.pos}, but only {got} remain")
            parts.append(part)
            got += len(part)
        self.pos += n
        return b"".join(parts)

    def remaining(self) -> int | None:
        """Bytes left in the file, if it can tell (a seekable file), else None."""
        try:
            here = self.fh.tell()
            end = self.fh.seek(0, os.SEEK_END)
            self.fh.seek(here)
        except (AttributeError, OSError, ValueError):
            return None
        return end - here

    def skip(self, n: int, crc: int, what: str) -> int:
        """Read ``n`` bytes in chunks, returning the CRC-32 continued over them."""
        while n > 0:
            part = self.read(min(_CHUNK, n), what)
            crc = zlib.crc32(part, crc)
            n -= len(part)
        return crc

    def fill(self, buf: np.ndarray, crc: int, what: str) -> int:
        """Read ``buf.nbytes`` bytes straight into ``buf``; the CRC-32 continued over them."""
        view = memoryview(buf.reshape(-1).view(np.uint8))
        readinto = getattr(self.fh, "readinto", None)
        got = 0
        while got < len(view):
            chunk = view[got:got + _CHUNK]
            if readinto is not None:
                k = readinto(chunk)
            else:
                part = self.fh.read(len(chunk))
                k = len(part)
                chunk[:k] = part
            if not k:
                raise self.fail(f"the file is truncated: {what} needs {len(view)} bytes at "
                                f"offset {self.pos}, but only {got} remain")
            crc = zlib.crc32(chunk[:k], crc)
            got += k
            self.pos += k
        return crc


def _foreign(head: bytes) -> str:
    if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}", b"c"):
        return ("it looks like a pickle (from pickle.dump or an old torch.save); fusegrad "
                "never unpickles, because loading a pickle can run arbitrary code")
    if head.startswith(b"PK\x03\x04"):
        return ("it looks like a zip archive (torch.save writes these); fusegrad reads only "
                "files written by fg.save")
    if head.startswith(b"\x93NUMPY"):
        return "it is a NumPy .npy file: read it with np.load and wrap it with fg.from_numpy"
    return "it does not start with fusegrad's magic bytes"


def load(f, map_location=None, weights_only: bool | None = None):
    """Read an object written by ``fg.save`` from ``f`` (a path or a binary file object).

    Loading only rebuilds the documented container, scalar and array types, so
    it is safe on untrusted files. ``map_location`` may be None or ``"cpu"``;
    ``weights_only`` is accepted for PyTorch compatibility (loading is always
    restricted to data). A file that is not a complete fusegrad file raises
    ``SerializationError`` (a ``ValueError``) naming the file and the problem.
    """
    if map_location is not None and str(map_location) != "cpu":
        raise ValueError(f"fg.load: map_location={map_location!r}; fusegrad Tensors live on "
                         "the CPU, so only None or 'cpu' is accepted")
    if isinstance(f, str | os.PathLike):
        with open(f, "rb") as fh:
            return _load(_Reader(fh, _name(f)))
    if not hasattr(f, "read"):
        raise TypeError(f"fg.load expects a path or a binary file object, got "
                        f"{type(f).__name__}")
    return _load(_Reader(f, _name(f)))


def _load(r: _Reader):
    head = r.fh.read(len(MAGIC))
    r.pos = len(head)
    if isinstance(head, str):
        raise TypeError(f"fg.load({r.name}): the file is open in text mode; open it with 'rb'")
    if head != MAGIC:
        if not head:
            raise r.fail("the file is empty")
        if len(head) < len(MAGIC) and MAGIC.startswith(head):
            raise r.fail("the file is truncated inside the magic bytes")
        raise r.fail(f"not a fusegrad file: {_foreign(head)}")
    version, hlen = _PRELUDE.unpack(r.read(_PRELUDE.size, "the format version and header "
                                                          "length"))
    if version != VERSION:
        raise r.fail(f"format version {version} is not supported (this fusegrad reads version "
                     f"{VERSION}); upgrade fusegrad or re-save the object")
    header = _parse_header(r, r.read(hlen, "the header"))
    nbytes = header["data_nbytes"]
    entries = [_entry(r, e, i, nbytes) for i, e in enumerate(header["tensors"])]
    _check_disjoint(r, entries)
    left = r.remaining()
    if left is not None and left < nbytes:
        raise r.fail(f"the file is truncated: the tensor data needs {nbytes} bytes at offset "
                     f"{r.pos}, but only {left} remain")
    data = _read_data(r, entries, nbytes, header["data_crc32"])
    arrays = [_build(r, e, a) for e, a in zip(entries, data)]
    return _Decoder(r, arrays).node(header["root"], 0)


def _read_data(r: _Reader, entries: list, nbytes: int, crc32: int) -> list:
    """Each entry's array, read straight from the file into its own new array in offset
    order (entries are disjoint, so the arrays together take at most the data's size),
    then the checksum over all the data bytes."""
    out = [None] * len(entries)
    pos = crc = 0
    for i in sorted(range(len(entries)), key=lambda i: entries[i]["offset"]):
        e = entries[i]
        arr = np.empty(e["shape"], e["np_dtype"])
        if e["nbytes"]:
            crc = r.skip(e["offset"] - pos, crc, "the tensor data")
            crc = r.fill(arr, crc, "the tensor data")
            pos = e["offset"] + e["nbytes"]
        out[i] = arr
    crc = r.skip(nbytes - pos, crc, "the tensor data")
    if crc != crc32:
        raise r.fail("the tensor data is corrupted (its CRC-32 checksum does not match)")
    return out


def _check(r: _Reader, cond: bool, what: str) -> None:
    if not cond:
        raise r.fail(f"malformed header: {what}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_header(r: _Reader, raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise r.fail(f"malformed header: not UTF-8 text ({e})") from None
    except json.JSONDecodeError as e:
        raise r.fail(f"malformed header: invalid JSON ({e})") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise r.fail(f"malformed header: {e}") from None
    except RecursionError:
        raise r.fail("malformed header: nested too deeply") from None
    _check(r, isinstance(header, dict), "the header is not a JSON object")
    _check(r, header.get("format") == FORMAT, f"'format' is not {FORMAT!r}")
    for key in ("data_nbytes", "data_crc32"):
        _check(r, _is_int(header.get(key)) and header[key] >= 0,
               f"{key!r} is not a non-negative integer")
    _check(r, isinstance(header.get("tensors"), list), "'tensors' is not a list")
    _check(r, "root" in header, "'root' is missing")
    return header


#: NumPy's limit on the number of dimensions.
_MAX_NDIM = 64


def _entry(r: _Reader, e, i: int, data_nbytes: int) -> dict:
    """Entry ``i`` of ``tensors``, checked (with its NumPy dtype), before any data is read."""
    where = f"tensors[{i}]"
    _check(r, isinstance(e, dict), f"{where} is not an object")
    kind, name, shape = e.get("kind"), e.get("dtype"), e.get("shape")
    _check(r, kind in ("tensor", "parameter", "ndarray"), f"{where} has unknown kind {kind!r}")
    _check(r, isinstance(name, str) and name in _DTYPES, f"{where} has unknown dtype {name!r}")
    _check(r, isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape),
           f"{where} has an invalid shape {_short(shape)}")
    _check(r, len(shape) <= _MAX_NDIM,
           f"{where} has {len(shape)} dimensions (at most {_MAX_NDIM})")
    rg, offset, nbytes = e.get("requires_grad"), e.get("offset"), e.get("nbytes")
    _check(r, isinstance(rg, bool), f"{where} has no boolean 'requires_grad'")
    dt = np.dtype(_DTYPES[name]).newbyteorder("<")
    _check(r, math.prod(max(d, 1) for d in shape) * dt.itemsize < 2**63,
           f"{where} has a shape {_short(shape)} too large for any array")
    numel = math.prod(shape)
    _check(r, _is_int(nbytes) and nbytes == numel * dt.itemsize,
           f"{where}: nbytes {nbytes!r} does not match shape {_short(shape)} of {name}")
    _check(r, _is_int(offset) and offset >= 0 and offset + nbytes <= data_nbytes,
           f"{where}: bytes [{offset!r}, +{nbytes}) lie outside the {data_nbytes} bytes of data")
    _check(r, not rg or (kind != "ndarray" and dt.kind == "f"),
           f"{where}: requires_grad is set on a {kind} of dtype {name}")
    return {"index": i, "kind": kind, "shape": shape, "np_dtype": dt, "requires_grad": rg,
            "offset": offset, "nbytes": nbytes}


def _check_disjoint(r: _Reader, entries: list) -> None:
    """No two entries share bytes (fg.save never writes that; allowing it would let a
    small file expand into many copies of the same bytes)."""
    spans = sorted((e["offset"], e["offset"] + e["nbytes"], e["index"])
                   for e in entries if e["nbytes"])
    for (_, end, i), (start, _, j) in itertools.pairwise(spans):
        _check(r, start >= end, f"tensors[{i}] and tensors[{j}] overlap in the data")


def _build(r: _Reader, e: dict, arr: np.ndarray):
    where = f"tensors[{e['index']}]"
    if arr.dtype.kind == "b" and arr.size and arr.view(np.uint8).max() > 1:
        raise r.fail(f"{where}: a bool array holds bytes other than 0 and 1 (corrupted)")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if e["kind"] == "ndarray":
        return arr
    t = TB.make(arr)
    if e["kind"] == "parameter":
        from .nn.parameter import Parameter

        return Parameter(t, requires_grad=e["requires_grad"])
    return t.requires_grad_(True) if e["requires_grad"] else t


class _Decoder:
    def __init__(self, r: _Reader, arrays: list):
        self.r = r
        self.arrays = arrays

    def node(self, n, depth: int):
        r = self.r
        _check(r, depth <= MAX_DEPTH, f"containers nest more than {MAX_DEPTH} deep")
        _check(r, isinstance(n, dict) and isinstance(n.get("type"), str),
               f"a node is not an object with a 'type': {_short(n)}")
        t = n["type"]
        if t == "none":
            return None
        if t in ("bool", "int", "str", "float", "dtype"):
            return self.scalar(t, n.get("value"), n)
        if t == "tensor":
            i = n.get("index")
            _check(r, _is_int(i) and 0 <= i < len(self.arrays),
                   f"a tensor node refers to entry {i!r} of {len(self.arrays)}")
            return self.arrays[i]
        _check(r, t in ("list", "tuple", "dict", "ordereddict"), f"unknown node type {t!r}")
        items = n.get("items")
        _check(r, isinstance(items, list), f"a {t} node has no 'items' list")
        if t in ("list", "tuple"):
            out = [self.node(v, depth + 1) for v in items]
            return out if t == "list" else tuple(out)
        _check(r, all(isinstance(kv, list) and len(kv) == 2 for kv in items),
               f"a {t} node's items are not [key, value] pairs")
        out = {} if t == "dict" else collections.OrderedDict()
        for k, v in items:
            out[self.key(k)] = self.node(v, depth + 1)
        return out

    def scalar(self, t: str, v, n):
        ok = {"bool": isinstance(v, bool), "int": _is_int(v), "str": isinstance(v, str),
              "dtype": isinstance(v, str) and v in _DTYPES,
              "float": (isinstance(v, int | float) and not isinstance(v, bool))
              or v in ("nan", "inf", "-inf")}[t]
        _check(self.r, ok, f"invalid {t} node {_short(n)}")
        if t == "float":
            return float(v)
        return _DTYPES[v] if t == "dtype" else v

    def key(self, k):
        if isinstance(k, dict) and k.get("type") == "tuple" and isinstance(k.get("items"), list):
            return tuple(self.key(v) for v in k["items"])
        _check(self.r, isinstance(k, dict) and k.get("type") in (
            "none", "bool", "int", "float", "str"), f"invalid dict key node {_short(k)}")
        return self.node(k, 0)


def _short(n) -> str:
    text = json.dumps(n)
    return text if len(text) <= 80 else text[:77] + "..."
