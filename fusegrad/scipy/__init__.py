"""``fusegrad.scipy``: differentiable versions of SciPy functions (``special``, ``stats``, ``linalg``, ``integrate``, ``signal``)."""
