"""A warm start: a function compiled before, in another process, is loaded. The IR
passes' result and its segments come from the pass cache, and the lean generator's
manifest names the entry and kernels whose cached machine code is loaded without any
LLVM IR being emitted (the SciPy routines they call, BLAS and a special function
here, are provided first). Anything missing or damaged falls back to running the
passes or compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import damage

pytestmark = pytest.mark.compiled

_CODE = """
import json, numpy as np, fusegrad as fg, fusegrad.numpy as fnp
import fusegrad.codegen.lean as lean
from fusegrad.codegen.lean import engine
from fusegrad.runtime import compiled, lean_exec
emitted, passes, split = [], [], []
real, real_simplify, real_segments = lean._lowered, compiled.simplify, lean_exec.segments
lean._lowered = lambda *a, **k: (emitted.append(1), real(*a, **k))[1]
compiled.simplify = lambda fn: (passes.append(1), real_simplify(fn))[1]
lean_exec.segments = lambda fn: (split.append(1), real_segments(fn))[1]
real_digest = lean.digest
lean.digest = lambda fn: (split.append(1), real_digest(fn))[1]
def f(x):
    h = fnp.tanh(x.reshape(3, 4).T @ x.reshape(3, 4))
    return (fnp.sum(fnp.concatenate([h[1:], h[:1] * 2.0]) ** 2)
            + fnp.sum(fg.scipy.special.gammaln(x * x + 1.0)))
g = fg.grad(f)(np.linspace(-1.0, 1.0, 12))
print(json.dumps({"grad": g.tolist(), "stats": engine.stats(), "emitted": len(emitted),
                  "passes": len(passes), "split": len(split)}))
"""


def _run(env) -> dict:
    out = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path))


def test_a_new_process_loads_the_manifest(env, tmp_path):
    cold = _run(env)
    assert cold["stats"]["compiled"] >= 2  # the kernels and the entry
    assert list((tmp_path / "lean").glob("*.json"))
    warm = _run(env)
    assert warm["grad"] == cold["grad"]
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["loaded"] >= 2
    assert cold["emitted"] >= 1 and warm["emitted"] == 0  # no IR was built
    assert cold["passes"] == 1 and warm["passes"] == 0  # nor were the passes run
    # nor was the program split into segments or printed to find its manifests: the
    # pass cache keeps that plan
    assert cold["split"] >= 2 and warm["split"] == 0


def test_a_damaged_pass_cache_entry_runs_the_passes(env, tmp_path):
    cold = _run(env)
    entries = list((tmp_path / "lean").glob("passes_*.pkl"))
    assert entries
    for path in entries:
        damage(path)
    again = _run(env)
    assert again["grad"] == cold["grad"] and again["passes"] == 1
    assert again["emitted"] == 0  # the manifest still names the machine code


def test_a_damaged_manifest_is_written_again(env, tmp_path):
    cold = _run(env)
    manifests = list((tmp_path / "lean").glob("*.json"))
    for path in manifests:
        path.write_bytes(path.read_bytes()[:-3])
    again = _run(env)  # emits the IR again; the machine code is still cached
    assert again["grad"] == cold["grad"]
    assert again["stats"]["compiled"] == 0 and again["stats"]["loaded"] >= 2
    assert again["emitted"] >= 1
    for path in manifests:
        json.loads(path.read_bytes()[32:])  # whole again


def test_a_missing_object_compiles_again(env, tmp_path):
    cold = _run(env)
    manifest = next((tmp_path / "lean").glob("*.json"))
    names = json.loads(manifest.read_bytes()[32:])["modules"]
    (tmp_path / "lean" / f"{names[0]}.o").unlink()
    again = _run(env)
    assert again["grad"] == cold["grad"]
    assert again["stats"]["compiled"] >= 1
