"""SciPy's own array-API code paths on traced arrays (``SCIPY_ARRAY_API=1``).

SciPy reads ``SCIPY_ARRAY_API`` once, when it is imported, so the gradients are computed
in one child process and compared here with SciPy's analytic derivatives (rosen_der,
rosen_hess, softmax) or finite differences of SciPy's NumPy path. docs/scipy.md lists
what works and why the rest does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.optimize as so
import scipy.special as ss
import scipy.stats as st

from tests.helpers import assert_close, numeric_grads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: a traced array SciPy converts to NumPy: an error (its gradient would be cut)
_CUT = ("TracerConversionError",)

X = [0.3, -0.7, 1.2, 0.5]
Y = [0.2, 1.5, 0.9, 2.0]

#: name -> (expression differentiated in the child, its NumPy value as a function of x, y)
CASES = {
    "rosen": ("fg.grad(so.rosen)(x)", None),
    "rosen_der": ("fg.jacobian(so.rosen_der)(x)", None),
    "rosen_jit": ("fg.jit(fg.grad(so.rosen))(x)", None),
    "logsumexp": ("fg.grad(ss.logsumexp)(x)", None),
    "logsumexp_jit": ("fg.jit(fg.grad(ss.logsumexp))(x)", None),
    "logsumexp_axis": ("fg.grad(lambda x: ss.logsumexp(x.reshape(2, 2), axis=1).sum())(x)",
                       lambda x: ss.logsumexp(x.reshape(2, 2), axis=1).sum()),
    "logsumexp_b": ("fg.grad(lambda x, y: ss.logsumexp(x, b=y), argnums=(0, 1))(x, y)",
                    lambda x, y: ss.logsumexp(x, b=y)),
    "softmax": ("fg.jacobian(ss.softmax)(x)", None),
    "log_softmax": ("fg.jacobian(ss.log_softmax)(x)", None),
    "xlogy": ("fg.grad(lambda x, y: ss.xlogy(x, y).sum(), argnums=(0, 1))(x, y)",
              lambda x, y: ss.xlogy(x, y).sum()),
    "gammaln": ("fg.grad(lambda y: ss.gammaln(y).sum())(y)", lambda y: ss.gammaln(y).sum()),
    "expit_jit": ("fg.jit(fg.grad(lambda x: ss.expit(x).sum()))(x)",
                  lambda x: ss.expit(x).sum()),
    "moment": ("fg.grad(lambda x: st.moment(x, 3))(x)", lambda x: st.moment(x, 3)),
    "skew": ("fg.grad(st.skew)(x)", st.skew),
    "kurtosis": ("fg.grad(st.kurtosis)(x)", st.kurtosis),
    "gmean": ("fg.grad(st.gmean)(y)", st.gmean),
    "zscore": ("fg.grad(lambda x: st.zscore(x)[0])(x)", lambda x: st.zscore(x)[0]),
    "tvar": ("fg.grad(st.tvar)(x)", st.tvar),
    "logsumexp_sign": ("fg.grad(lambda x: ss.logsumexp(x, return_sign=True)[0])(x)",
                       lambda x: ss.logsumexp(x, return_sign=True)[0]),
    "polygamma": ("fg.grad(lambda y: ss.polygamma(1, y).sum())(y)",
                  lambda y: ss.polygamma(1, y).sum()),
    "special_mix": ("fg.grad(lambda x: (ss.log_ndtr(x) + ss.i0(x) + ss.softplus(x)"
                    " + ss.erfc(x) + ss.log_expit(x)).sum())(x)",
                    lambda x: (ss.log_ndtr(x) + ss.i0(x) + ss.softplus(x) + ss.erfc(x)
                               + ss.log_expit(x)).sum()),
    "rel_entr": ("fg.grad(lambda y: ss.rel_entr(y, y + 1).sum())(y)",
                 lambda y: ss.rel_entr(y, y + 1).sum()),
    "stats_mix": ("fg.grad(lambda y: st.hmean(y) + st.pmean(y, 2.5) + st.gstd(y) + st.sem(y)"
                  " + st.tstd(y) + st.trim_mean(y, 0.1) + st.describe(y).variance)(y)",
                  lambda y: st.hmean(y) + st.pmean(y, 2.5) + st.gstd(y) + st.sem(y)
                  + st.tstd(y) + st.trim_mean(y, 0.1) + st.describe(y).variance),
    "entropy": ("fg.grad(lambda x, y: st.entropy(x + 1, y), argnums=(0, 1))(x, y)",
                lambda x, y: st.entropy(x + 1, y)),
    "kl_div": ("fg.grad(lambda y: ss.kl_div(y, y[::-1]).sum())(y)",
               lambda y: ss.kl_div(y, y[::-1]).sum()),
    "zmap": ("fg.grad(lambda x, y: st.zmap(x, y)[0], argnums=(0, 1))(x, y)",
             lambda x, y: st.zmap(x, y)[0]),
}

#: name -> (expression, the errors it may raise): the "no" rows of docs/scipy.md's table
FAILS = {
    "huber": ("fg.grad(lambda y: ss.huber(1.0, y).sum())(y)", _CUT),
    "norm_logpdf": ("fg.grad(lambda x: st.norm.logpdf(x).sum())(x)", _CUT),
    "variation": ("fg.grad(st.variation)(y)", ("TypeError",)),
    "iqr": ("fg.grad(st.iqr)(x)", ("TypeError",)),
    "spearmanr": ("fg.grad(lambda x, y: st.spearmanr(x, y).statistic, argnums=(0, 1))(x, y)",
                  ("AttributeError",)),
    "xlogy_numpy_y": ("fg.grad(lambda x: ss.xlogy(x, y).sum())(x)", ("TypeError",)),
}

CHILD = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import fusegrad as fg
    import scipy.optimize as so, scipy.special as ss, scipy.stats as st
    warnings.simplefilter("error")  # no silent constant
    x, y = np.array(%r), np.array(%r)
    out = {}
    for name, expr in json.loads(sys.argv[1]).items():
        r = eval(expr)
        out[name] = [np.asarray(a).tolist() for a in (r if isinstance(r, tuple) else (r,))]
    for name, expr in json.loads(sys.argv[2]).items():
        try:
            eval(expr)
            out[name] = "no error"
        except Exception as e:
            out[name] = type(e).__name__
    print(json.dumps(out))
""") % (X, Y)


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, SCIPY_ARRAY_API="1", PYTHONPATH=ROOT)
    exprs = [json.dumps({k: v[0] for k, v in table.items()}) for table in (CASES, FAILS)]
    run = subprocess.run([sys.executable, "-c", CHILD, *exprs], capture_output=True,
                         text=True, env=env, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    return {k: v if isinstance(v, str) else [np.array(a) for a in v]
            for k, v in json.loads(run.stdout.strip().splitlines()[-1]).items()}


def _analytic(name, x):
    s = ss.softmax(x)
    return {
        "rosen": so.rosen_der(x), "rosen_jit": so.rosen_der(x),
        "rosen_der": so.rosen_hess(x),
        "logsumexp": s, "logsumexp_jit": s,
        "softmax": np.diag(s) - np.outer(s, s),
        "log_softmax": np.eye(len(x)) - s[None, :],
    }[name]


@pytest.mark.parametrize("name", sorted(k for k, v in CASES.items() if v[1] is None))
def test_matches_the_analytic_derivative(results, name):
    (got,) = results[name]
    assert_close(got, _analytic(name, np.array(X)), "exact64")


@pytest.mark.parametrize("name", sorted(k for k, v in CASES.items() if v[1] is not None))
def test_matches_finite_differences(results, name):
    expr, f = CASES[name]
    x, y = np.array(X), np.array(Y)
    args = [x, y] if "(x, y)" in expr else [y] if expr.endswith("(y)") else [x]
    expected = numeric_grads(f, args)
    assert len(results[name]) == len(expected)
    for got, want in zip(results[name], expected, strict=True):
        assert_close(got, want, "fd")


@pytest.mark.parametrize("name", sorted(FAILS))
def test_what_does_not_work_fails_loudly(results, name):
    assert results[name] in FAILS[name][1]
