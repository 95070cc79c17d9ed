"""Fault injection into the on-disk cache of compiled code (``codegen/lean/engine.py``:
machine code per module, a manifest per program; ``runtime/pass_cache.py``: the
optimised IR per program; the cache directory itself: ``codegen/compile.py``).

Each case damages a cache in one way, then runs a compiled gradient in a fresh
process and checks that it gives the correct result, that it warns at most once
per cause, and, for stale entries, that nothing was loaded from them. The
function has no transcendental ops so that a cold compile stays short.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.compiled

#: The checkout under test: children import fusegrad from here.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Run in a fresh process: a compiled gradient, its check, the warnings it raised
#: (one line of JSON) and how the machine code was obtained (the engine's counts).
CHILD = textwrap.dedent("""
    import json, os, sys, warnings
    import numpy as np
    READ_ONLY = os.environ.get("FG_TEST_READ_ONLY")
    WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def refuse_writes(event, args):  # root ignores permission bits: refuse as EROFS would
        if not args or not str(args[0]).startswith(READ_ONLY):
            return
        if event == "open" and args[2] & WRITES or event in (
                "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.chmod"):
            raise PermissionError(30, "Read-only file system", str(args[0]))

    if READ_ONLY:
        sys.addaudithook(refuse_writes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import fusegrad as fg, fusegrad.numpy as fnp
        from fusegrad.codegen import compile as cg
        from fusegrad.codegen.lean import engine
        x = np.linspace(-1.0, 1.0, 33)
        g = fg.jit(fg.grad(lambda x: fnp.sum(x * x * x + 2.0 * x)))(x)
        ok = bool(np.allclose(g, 3.0 * x * x + 2.0, rtol=1e-13, atol=1e-13))
    stats = engine.stats()
    print(json.dumps({"ok": ok, "warnings": [str(w.message) for w in caught],
                      "hits": stats["loaded"], "misses": stats["compiled"],
                      "dir": cg._directory()}))
""")


def _child(cache_dir, **extra_env: str) -> dict:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT, **extra_env)
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["ok"], out
    causes = [w.split(" (")[0] for w in out["warnings"]]
    assert len(causes) == len(set(causes)), f"a cause warned twice: {out['warnings']}"
    return out


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache filled by one cold run, copied afresh into each test's directory."""
    src = tmp_path_factory.mktemp("warm")
    first = _child(src)
    assert first["misses"] >= 1 and first["warnings"] == []
    return src


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


def _files(cache, pattern):
    return sorted(cache.glob(pattern))


def test_warm_cache_loads_machine_code_without_compiling(warm, tmp_path):
    out = _child(_copy(warm, tmp_path))
    assert out["hits"] >= 1 and out["misses"] == 0 and out["warnings"] == []


#: Every kind of file with every damage; by default one damage per kind (each case
#: runs two fresh processes), the others under ``-m slow``.
DEFAULT_DAMAGES = [("lean/*.o", "truncate"), ("lean/*.json", "garbage"),
                   ("lean/passes_*.pkl", "truncate")]
DAMAGES = [pytest.param(what, damage,
                        marks=() if (what, damage) in DEFAULT_DAMAGES else pytest.mark.slow)
           for what, _ in DEFAULT_DAMAGES for damage in ("truncate", "garbage")]


@pytest.mark.parametrize("what,damage", DAMAGES)
def test_damaged_entries_are_recompiled(warm, tmp_path, what, damage):
    cache = _copy(warm, tmp_path)
    files = _files(cache, what)
    assert files
    for p in files:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 3] if damage == "truncate" else os.urandom(len(data)))
    out = _child(cache)
    assert len(out["warnings"]) <= 1
    second = _child(cache)  # the damage was repaired: a clean load
    assert second["misses"] == 0 and second["warnings"] == []


def test_machine_code_without_its_manifest(warm, tmp_path):
    cache = _copy(warm, tmp_path)
    for p in _files(cache, "lean/*.json"):
        p.unlink()
    out = _child(cache)  # the program's modules are found again by their content
    assert out["warnings"] == [] and out["misses"] == 0


def test_manifest_without_its_machine_code(warm, tmp_path):
    cache = _copy(warm, tmp_path)
    for p in _files(cache, "lean/m*.o"):
        p.unlink()
    out = _child(cache)
    assert out["warnings"] == [] and out["misses"] >= 1


def test_machine_code_of_another_content_is_never_loaded(warm, tmp_path):
    # every object file holds its own hash: one whose bytes were swapped for another
    # module's (another version wrote it, or it was edited) fails its check
    cache = _copy(warm, tmp_path)
    objects = _files(cache, "lean/m*.o")
    assert len(objects) >= 2
    first = objects[0].read_bytes()
    objects[0].write_bytes(objects[1].read_bytes()[:32] + first[32:])
    out = _child(cache)
    assert len(out["warnings"]) == 1 and "damaged" in out["warnings"][0]


@pytest.mark.parametrize("field", ["fusegrad", "numba", "llvmlite", "numpy"])
def test_a_version_change_changes_every_module_key(monkeypatch, field):
    from fusegrad.codegen import compile as cg

    # fusegrad's own version is read by the cache key where it lives (the compile module)
    module = cg if field == "fusegrad" else importlib.import_module(field)
    from fusegrad.codegen.lean import engine

    monkeypatch.setattr(cg, "_SALT", None)
    before = engine.module_name("define void @f() { ret void }")
    monkeypatch.setattr(module, "__version__", module.__version__ + ".post-other")
    monkeypatch.setattr(cg, "_SALT", None)
    assert engine.module_name("define void @f() { ret void }") != before


def test_another_cpu_has_its_own_module_keys(monkeypatch):
    # a cache directory shared by machines of different CPUs (a home directory on a
    # cluster) must never give one the other's machine code: its instructions may be
    # missing there
    from fusegrad.codegen import compile as cg
    from fusegrad.codegen.lean import engine

    here = cg._machine()
    if sys.platform.startswith("linux"):
        assert "flags" in here or "Features" in here or "isa" in here
    monkeypatch.setattr(cg, "_SALT", None)
    before = engine.module_name("define void @f() { ret void }")
    other = here.replace("avx512f", "").replace("avx2", "") + " (another model)"
    monkeypatch.setattr(cg, "_machine", lambda: other)
    monkeypatch.setattr(cg, "_SALT", None)
    assert engine.module_name("define void @f() { ret void }") != before


@pytest.mark.parametrize("source", ["lean/kernel.py", "mathlib/exp.py"])
def test_a_code_generator_change_changes_every_module_key(monkeypatch, tmp_path, source):
    # the key hashes every source under codegen/, the math library's subpackage too
    from fusegrad.codegen import compile as cg

    here = tmp_path / "codegen"
    shutil.copytree(cg._HERE, here, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cg, "_HERE", str(here))
    from fusegrad.codegen.lean import engine

    monkeypatch.setattr(cg, "_SALT", None)
    before = engine.module_name("define void @f() { ret void }")
    with open(here / source, "a") as f:
        f.write("# edited\n")
    monkeypatch.setattr(cg, "_SALT", None)
    assert engine.module_name("define void @f() { ret void }") != before


def test_read_only_cache_directory(warm, tmp_path):
    cache = _copy(warm, tmp_path / "ro")
    for p in [cache, *cache.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        out = _child(cache, FG_TEST_READ_ONLY=str(cache))
    finally:
        for p in [cache, *cache.rglob("*")]:
            p.chmod(0o755)
    assert len(out["warnings"]) == 1 and "is not writable" in out["warnings"][0]
    assert out["dir"] != str(cache)


def test_cache_path_under_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = _child(blocker / "cache")
    assert len(out["warnings"]) == 1 and "is not writable" in out["warnings"][0]


def _compile_in_spawned_process(cache_dir, barrier, queue):
    os.environ["FUSEGRAD_CACHE_DIR"] = cache_dir
    import warnings

    import numpy as np

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import fusegrad as fg
        import fusegrad.numpy as fnp
        from fusegrad.codegen.lean import engine

        x = np.linspace(-1.0, 1.0, 33)  # as the later child: the same program
        barrier.wait(timeout=120)
        g = fg.jit(fg.grad(lambda x: fnp.sum(x * x * x + 2.0 * x)))(x)
        ok = bool(np.allclose(g, 3.0 * x * x + 2.0, rtol=1e-13, atol=1e-13))
    queue.put((ok, [str(w.message) for w in caught], engine.stats()["compiled"]))


#: Three processes race to fill one cache: each file is written whole (renamed into
#: place), so whichever write wins, every process and every later one reads whole files
#: (more processes check nothing more on a 2-core machine).
PROCESSES = 3


def test_spawned_processes_compile_into_one_cold_cache(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_compile_in_spawned_process, args=(str(tmp_path), barrier, queue))
             for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(ok for ok, _, _ in results), results
    assert all(w == [] for _, w, _ in results), results
    later = _child(tmp_path)
    assert later["misses"] == 0 and later["warnings"] == []
