"""Call overhead: the warm call of ``grad``, ``value_and_grad`` and ``jit`` over many
argument structures, each a small function whose native work is well under a
microsecond, so what is timed is the Python between the call and the machine code.

Structures: one array, 0-d and float32 arrays, a strided array, Python floats and ints,
NumPy scalars, several arguments, ``argnums`` tuples, lists, tuples, dicts, named
tuples, nested pytrees, keyword arguments, ``has_aux`` and ``static_argnums``: the
shapes SciPy-style scalar functions of a few variables take (Rosenbrock on a length-n
array, ``f(x, y, z)`` of floats, a dict of parameters).

    python -m benchmarks.call_overhead [--calls N] [--rounds R] [--only SUBSTRING]

prints the median µs per call of each (structure, transform), the worst last.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp

Pair = collections.namedtuple("Pair", "a b")
_rng = np.random.default_rng(0)
_x16 = _rng.uniform(-1, 1, 16)
_x8 = _rng.uniform(-1, 1, 8)


def _w(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def _rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _rosen_seq(x):
    return sum(100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
               for i in range(len(x) - 1))


def _dict_sum(p):
    return sum(fnp.sin(v) * (i + 1) for i, v in enumerate(p.values()))


def _xyz(x, y, z):
    return x * x * y + fnp.sin(z) * y + z * x


def _two(x, y):
    return fnp.sum(x * y + fnp.sin(x))


def _seq(p):
    return fnp.sum(p[0] * p[1]) + fnp.sum(fnp.sin(p[2]))


def _params(p):
    return fnp.sum(p["w"] * p["x"]) + p["b"] ** 2 + fnp.tanh(p["c"])


def _nested(p):
    return (fnp.sum(p["layers"][0]["w"] * p["layers"][1]["w"])
            + fnp.sum(p["bias"][0] ** 2) + p["bias"][1] * p["scale"])


def _named(p):
    return fnp.sum(p.a * p.a) + fnp.sum(fnp.cos(p.b))


def _scaled(x, scale=1.0):
    return fnp.sum(fnp.sin(x)) * scale


def _aux(x):
    return fnp.sum(x * x), fnp.sin(x)


def _static(x, n):
    return fnp.sum(x ** n)


#: (name, function, arguments, options of grad/value_and_grad, kwargs, jit options)
CASES = [
    ("array[16]", _w, (_x16,), {}, {}, {}),
    ("array[1000]", _w, (_rng.uniform(-1, 1, 1000),), {}, {}, {}),
    ("array 0-d", _w, (np.array(0.5),), {}, {}, {}),
    ("array[16] float32", _w, (_x16.astype(np.float32),), {}, {}, {}),
    ("array[32][::2] strided", _w, (_rng.uniform(-1, 1, 32)[::2],), {}, {}, {}),
    ("float", _w, (0.5,), {}, {}, {}),
    ("np.float64", _w, (np.float64(0.5),), {}, {}, {}),
    ("rosenbrock array[2]", _rosen, (np.array([0.5, 1.5]),), {}, {}, {}),
    ("rosenbrock array[20]", _rosen, (_rng.uniform(0, 2, 20),), {}, {}, {}),
    ("rosenbrock list of 5 floats", _rosen_seq, ([0.1, 0.2, 0.3, 0.4, 0.5],), {}, {}, {}),
    ("rosenbrock 10 float arguments", lambda *x: _rosen_seq(x), tuple(np.linspace(0, 1, 10)),
     {"argnums": tuple(range(10))}, {}, {}),
    ("rosenbrock 20 float arguments", lambda *x: _rosen_seq(x), tuple(np.linspace(0, 1, 20)),
     {"argnums": tuple(range(20))}, {}, {}),
    ("dict of 20 floats", _dict_sum, ({f"p{i}": 0.1 * i for i in range(20)},), {}, {}, {}),
    ("list of 20 arrays", lambda p: fnp.sum(_rosen_seq(p)), ([_x8 * i for i in range(20)],),
     {}, {}, {}),
    ("x, y, z floats argnums=0", _xyz, (0.5, 1.5, -0.3), {}, {}, {}),
    ("x, y, z floats argnums=(0,1,2)", _xyz, (0.5, 1.5, -0.3),
     {"argnums": (0, 1, 2)}, {}, {}),
    ("x, y, z int/float mix argnums=(0,2)", _xyz, (0.5, 2, -0.3), {"argnums": (0, 2)}, {}, {}),
    ("two arrays argnums=0", _two, (_x8, _x8 + 1), {}, {}, {}),
    ("two arrays argnums=(0,1)", _two, (_x8, _x8 + 1), {"argnums": (0, 1)}, {}, {}),
    ("array, float", _two, (_x8, 0.5), {"argnums": (0, 1)}, {}, {}),
    ("tuple of 3 arrays", _seq, ((_x8, _x8 + 1, _x8 * 2),), {}, {}, {}),
    ("list of 3 arrays", _seq, ([_x8, _x8 + 1, _x8 * 2],), {}, {}, {}),
    ("tuple of 3 floats", _seq, ((0.5, 1.5, 2.5),), {}, {}, {}),
    ("dict of arrays and floats", _params,
     ({"w": _x8, "x": _x8 + 1, "b": 0.5, "c": 1.5},), {}, {}, {}),
    ("nested dict/list/tuple", _nested,
     ({"layers": [{"w": _x8}, {"w": _x8 + 1}], "bias": (_x8, 0.5), "scale": 2.0},),
     {}, {}, {}),
    ("namedtuple", _named, (Pair(_x8, _x8 + 1),), {}, {}, {}),
    ("kwargs scale=2.0", _scaled, (_x16,), {}, {"scale": 2.0}, {}),
    ("has_aux", _aux, (_x16,), {"has_aux": True}, {}, None),
    ("static_argnums n=3", _static, (_x16, 3), None, {}, {"static_argnums": 1}),
]


def _transforms(f, opts, jit_opts):
    out = []
    if opts is not None:
        out.append(("grad", fg.grad(f, **opts)))
        out.append(("value_and_grad", fg.value_and_grad(f, **opts)))
    if jit_opts is not None:
        out.append(("jit", fg.jit(f, **jit_opts)))
    return out


def measure(calls: int = 2000, rounds: int = 7, only: str = "") -> list[tuple[str, str, float]]:
    """``[(structure, transform, median µs per warm call)]``."""
    rows = []
    for name, f, args, opts, kwargs, jit_opts in CASES:
        if only and only not in name:
            continue
        for label, g in _transforms(f, opts, jit_opts):
            g(*args, **kwargs)
            g(*args, **kwargs)
            per = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                for _ in range(calls):
                    g(*args, **kwargs)
                per.append((time.perf_counter() - t0) / calls * 1e6)
            rows.append((name, label, statistics.median(per)))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    rows = measure(a.calls, a.rounds, a.only)
    width = max(len(r[0]) for r in rows)
    print(f"{'structure':<{width}}  {'transform':<15}  µs/call")
    for name, label, us in rows:
        print(f"{name:<{width}}  {label:<15}  {us:8.2f}")
    worst = max(rows, key=lambda r: r[2])
    print(f"worst: {worst[0]} ({worst[1]}) {worst[2]:.2f} µs; "
          f"median {statistics.median(r[2] for r in rows):.2f} µs")


if __name__ == "__main__":
    main()
