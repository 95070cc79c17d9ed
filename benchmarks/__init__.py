"""fusegrad's benchmark suite: the project's workloads W1-W5 against NumPy, Numba, JAX, PyTorch.

Run it with ``fusegrad bench`` (or ``python -m fusegrad.cli bench``); see README.md here.
"""
