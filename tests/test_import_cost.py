"""What ``import fusegrad`` and a first gradient load: every surface a gradient does not
need (the eager Tensor, ``nn``, ``optim``, ...) loads on first use (PEP 562 in
``fusegrad/__init__.py``), and SciPy, Numba and the other heavy libraries stay out of a
gradient's process. Each check runs in a new interpreter, so that nothing another test
imported counts; the facts are structural, not times (docs/performance.md has those).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import fusegrad as fg

#: loaded by neither ``import fusegrad`` nor a first gradient
SURFACES = ("fusegrad.eager", "fusegrad.nn", "fusegrad.optim", "fusegrad.autograd",
            "fusegrad.amp", "fusegrad.masked", "fusegrad.random", "fusegrad.serialization",
            "fusegrad.utils", "fusegrad.distributed", "fusegrad.scipy.optimize",
            "fusegrad.transforms.control", "fusegrad.transforms.vectorize",
            "fusegrad.transforms.forward", "fusegrad.ir.parser", "fusegrad.transforms.export",
            "fusegrad.array_api", "fusegrad.numpy.linalg", "fusegrad.numpy.fft",
            "fusegrad.scipy.special", "fusegrad.passes.vmap", "fusegrad.passes.batching",
            "fusegrad.passes.autodiff.control_vjp", "fusegrad.passes.autodiff.linalg_vjp")
HEAVY = ("scipy", "numba", "threadpoolctl", "torch", "jax", "dask")
#: what NumPy and the standard library load on first use that a gradient does not need
#: (``numpy.random``: the traced code's first draw imports it, ``tracer.effects``;
#: ``hashlib``: OpenSSL's libcrypto, where ``_sources.sha256`` is CPython's own;
#: ``dataclasses``: the IR's records are plain classes, ``ir/types.py``)
UNUSED = ("numpy.random", "hashlib", "numpy.fft", "dataclasses")


def _loaded(code: str, tmp_path, *watched: str) -> dict[str, bool]:
    """Run ``code`` in a new interpreter (lean code generator, empty cache) and say which
    of ``watched`` modules it loaded."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps({{m: m in sys.modules for m in {list(watched)!r}}}))
    """)
    env = {k: v for k, v in os.environ.items()
           if k != "FUSEGRAD_DISABLE_JIT"}
    env["FUSEGRAD_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_import_loads_no_surface_nor_the_code_generator(tmp_path):
    loaded = _loaded("import fusegrad", tmp_path, *SURFACES, *HEAVY, "fusegrad.transforms",
                     "fusegrad.runtime", "fusegrad.codegen", "llvmlite")
    assert not any(loaded.values()), sorted(m for m, v in loaded.items() if v)


def test_first_gradient_loads_no_surface_nor_scipy_numba(tmp_path):
    loaded = _loaded("""
        import numpy as np
        import fusegrad as fg
        rosen = fg.grad(lambda x: 100.0 * (x[1] - x[0] ** 2) ** 2 + (1.0 - x[0]) ** 2
                        + 100.0 * (x[2] - x[1] ** 2) ** 2 + (1.0 - x[1]) ** 2)
        g = rosen(np.array([0.5, -0.3, 1.2]))
        assert abs(g[0] - 109.0) < 1e-12 and abs(g[2] - 222.0) < 1e-12, g
        """, tmp_path, *SURFACES, *HEAVY, *UNUSED, "scipy.linalg", "fusegrad.codegen.lean")
    assert loaded.pop("fusegrad.codegen.lean"), "the gradient did not run compiled"
    assert not any(loaded.values()), sorted(m for m, v in loaded.items() if v)


def test_a_gradient_that_needs_a_rule_family_loads_it(tmp_path):
    """The VJP rules of linear algebra, control flow and the other op families register
    when a gradient first looks for one of them (``passes/autodiff/__init__.py``)."""
    loaded = _loaded("""
        import numpy as np
        import fusegrad as fg
        a = np.array([[2.0, 1.0], [1.0, 3.0]])
        g = fg.grad(lambda a: fg.numpy.linalg.slogdet(a)[1])
        assert np.allclose(g(a), np.linalg.inv(a).T)
        h = fg.grad(lambda x: fg.cond(x > 0, lambda x: x * x, lambda x: -x, x))
        assert h(3.0) == 6.0 and h(-3.0) == -1.0
        """, tmp_path, "fusegrad.passes.autodiff.linalg_vjp",
        "fusegrad.passes.autodiff.control_vjp")
    assert all(loaded.values()), loaded


def test_touching_a_surface_loads_it(tmp_path):
    loaded = _loaded("""
        import fusegrad as fg
        w = fg.nn.Linear(2, 3).weight
        assert w.shape == (3, 2) and w.detach().tril().shape == (3, 2)  # a complete Tensor
        """, tmp_path, "fusegrad.nn", "fusegrad.eager", "fusegrad.optim")
    assert loaded == {"fusegrad.nn": True, "fusegrad.eager": True, "fusegrad.optim": False}
    loaded = _loaded("""
        from fusegrad import Tensor, no_grad
        import fusegrad as fg
        with no_grad():
            assert isinstance(fg.tensor([1.0]) * 2, Tensor)
        assert fg.scipy.minimize is fg.scipy.optimize.minimize
        assert not fg.cuda.amp.GradScaler(enabled=False).is_enabled()  # as fusegrad.amp made it
        assert fg.optim.SGD and fg.autograd.grad and fg.save and fg.vmap
        """, tmp_path, "fusegrad.eager", "fusegrad.optim", "fusegrad.autograd",
        "fusegrad.scipy.optimize", "fusegrad.serialization", "fusegrad.transforms.vectorize")
    assert all(loaded.values()), loaded


def test_numpy_and_array_api_protocols_work_without_importing_the_surfaces(tmp_path):
    """``fusegrad.numpy`` registers with the tracer when ``fusegrad`` is imported, and
    ``fusegrad`` what loads the array API namespace, ``fusegrad.numpy.linalg`` and ``fft``
    and the ``scipy.special`` table: NumPy's and SciPy's own functions work on traced
    arrays at once."""
    loaded = _loaded("""
        import numpy as np
        import scipy.special
        import fusegrad as fg
        g = fg.grad(lambda x: np.sum(np.sin(x)) + x.__array_namespace__().sum(x * x))
        assert np.allclose(g(np.zeros(3)), 1.0)
        h = fg.grad(lambda x: np.linalg.norm(x) + np.fft.rfft(x)[0].real
                    + np.sum(scipy.special.expit(x)))
        s = scipy.special.expit(np.array([3.0, 4.0]))
        assert np.allclose(h(np.array([3.0, 4.0])), np.array([0.6, 0.8]) + 1.0 + s * (1 - s))
        """, tmp_path, "fusegrad.eager", "fusegrad.array_api", "fusegrad.numpy.linalg",
        "fusegrad.numpy.fft", "fusegrad.scipy.special")
    assert loaded == {"fusegrad.eager": False, "fusegrad.array_api": True,
                      "fusegrad.numpy.linalg": True, "fusegrad.numpy.fft": True,
                      "fusegrad.scipy.special": True}


def test_every_public_name_is_listed_and_reachable():
    names = dir(fg)
    assert set(fg.__all__) <= set(names)
    for name in (*fg.__all__, "Tensor", "float32", "pi", "config", "ir", "scipy", "eager",
                 "_scipy_special", "_scipy_optimize", "_tensor_all"):
        assert getattr(fg, name) is not None, name
    assert fg.grad is fg.transforms.reverse.grad and fg.tensor is fg.eager.creation.tensor
    assert {"Linear", "Module", "functional"} <= set(dir(fg.nn))
    assert {"minimize", "optimize", "special", "linalg", "stats"} <= set(dir(fg.scipy))
    namespace: dict = {}
    exec("from fusegrad import *", namespace)
    assert set(fg.__all__) <= set(namespace) and namespace["no_grad"] is fg.no_grad
    assert np.float64(fg.pi) == np.pi


def test_an_unknown_name_is_an_attribute_error():
    for module in (fg, fg.scipy, fg.ir):
        assert not hasattr(module, "no_such_name")
        assert not hasattr(module, "__no_such_dunder__")
