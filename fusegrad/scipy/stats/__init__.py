"""``fusegrad.scipy.stats``: log-densities, densities and CDFs of SciPy's distributions.

One module per family, with SciPy's argument conventions (``loc``, ``scale``,
shape parameters, NumPy broadcasting, positional or keyword) and gradients with
respect to every continuous argument::

    import fusegrad.scipy.stats as stats
    stats.norm.logpdf(x, mu, sigma)

``norm`` (pdf, logpdf, cdf, logcdf, sf, logsf, ppf, isf), ``t``, ``gamma``, ``beta``,
``chi2`` (pdf, logpdf, cdf, logcdf, sf, logsf), ``poisson`` (pmf, logpmf, cdf, logcdf),
``multivariate_normal`` and ``dirichlet`` (pdf, logpdf). Invalid parameters
(``scale <= 0``, ...) give NaN, as in SciPy. The CDFs of ``gamma`` and ``chi2`` are
differentiable in every argument to any order; those of ``t`` and ``beta`` are built
on the incomplete beta function, differentiable once in its shapes: a second
derivative in ``df`` or ``a``/``b`` raises ``NotImplementedError``.
"""

from . import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
