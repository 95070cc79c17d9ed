"""Fused IR -> generated Numba module -> compiled callable, and the math library.

Nothing here yet: every transform executes through ``fusegrad.runtime.run``.
"""
