"""A program's modules compiled on helper processes (``codegen/lean/parallel.py``): the
same machine code and results as compiled in one process, counted as compiled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fusegrad.codegen.lean import parallel

pytestmark = pytest.mark.compiled

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: a step of a small MLP with layer norm: a dozen kernels, so helpers are forked
SCRIPT = textwrap.dedent("""
    import hashlib, os, sys
    import numpy as np
    import fusegrad as fg, fusegrad.numpy as fnp
    from fusegrad.codegen.lean import engine

    def loss(p, x):
        h = x
        for w in p:
            h = fnp.tanh(h @ w)
            h = (h - fnp.mean(h, axis=1, keepdims=True)) / fnp.sqrt(
                fnp.var(h, axis=1, keepdims=True) + 1e-5)
            h = h * fnp.exp(-h * h) + fnp.sin(h)
        return fnp.sum(fnp.log1p(h * h))

    rng = np.random.default_rng(0)
    p = [rng.standard_normal((8, 8)) * 0.5 for _ in range(3)]
    x = rng.standard_normal((16, 8))
    v, g = fg.jit(fg.value_and_grad(loss))(p, x)
    digest = hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in (v, *g))).hexdigest()
    folder = os.path.join(os.environ["FUSEGRAD_CACHE_DIR"], "lean")
    objects = sorted(f for f in os.listdir(folder) if f.endswith(".o"))
    print(digest, engine.stats()["compiled"], len(objects))
""")


def _run(tmp_path, processes: int, name: str) -> list[str]:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path / name), PYTHONPATH=ROOT,
               FUSEGRAD_COMPILE_PROCESSES=str(processes), FUSEGRAD_LOG_COMPILES="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return [*out.stdout.split(), out.stderr]


def test_helpers_compile_the_same_machine_code(tmp_path):
    one = _run(tmp_path, 1, "one")
    three = _run(tmp_path, 3, "three")
    assert "waiting for helper processes" in three[3]
    assert "waiting for helper processes" not in one[3]
    assert one[0] == three[0]  # the same bits
    # as many modules, each compiled (counted so) by its process; the per-machine
    # runtime modules, built once by whichever process came first, are not in the cache
    assert one[2] == three[2] and int(one[1]) >= int(one[2]) and int(three[1]) >= int(three[2])
    names = sorted(os.listdir(tmp_path / "one" / "lean"))
    assert names == sorted(os.listdir(tmp_path / "three" / "lean"))
    for n in names:  # byte for byte the same object files and manifests
        if not n.startswith("passes_"):
            assert (tmp_path / "one" / "lean" / n).read_bytes() == (
                tmp_path / "three" / "lean" / n).read_bytes(), n


def test_modules_are_drawn_one_at_a_time_costliest_first():
    kernel = ("x" * 100, "k", None, "kernel")
    todo = [("x" * 300, "e", None, "entry"), kernel, ("x" * 80, "m", print, "kernel")]
    todo.sort(key=parallel._cost, reverse=True)
    assert [m[1] for m in todo] == ["m", "k", "e"]  # linked: 160; entry: not optimised
    read, write = os.pipe()
    os.write(write, b"".join(i.to_bytes(4, "little") for i in (2, 0, 1)))
    os.close(write)
    try:
        assert [m[1] for m in parallel._draw(read, todo)] == ["e", "m", "k"]
    finally:
        os.close(read)
