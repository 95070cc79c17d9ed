"""``fusegrad.scipy.stats``: log-densities, densities and CDFs of SciPy's distributions.

One module per family, with SciPy's argument conventions (``loc``, ``scale``,
shape parameters, NumPy broadcasting, positional or keyword) and gradients with
respect to every continuous argument::

    import fusegrad.scipy.stats as stats
    stats.norm.logpdf(x, mu, sigma)

``norm`` (pdf, logpdf, cdf, logcdf, sf, logsf, ppf, isf), ``t``, ``gamma``, ``beta``
(pdf, logpdf), ``poisson`` (pmf, logpmf, cdf, logcdf), ``multivariate_normal`` and
``dirichlet`` (pdf, logpdf). Invalid parameters (``scale <= 0``, ...) give NaN, as in
SciPy. The CDFs of ``t``, ``gamma`` and ``beta`` need regularised incomplete beta and
gamma functions differentiable in their shape parameters, which fusegrad does not
have: they raise ``NotImplementedError``.
"""

from . import beta, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["beta", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
