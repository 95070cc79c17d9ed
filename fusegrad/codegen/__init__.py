"""Fused IR -> generated Numba module -> compiled callable, and the math library.

``module.generate`` writes one Python module per fused Function (loop kernels in
``emit``, the ops between them in ``driver``, control flow in ``control``, buffer
plans in ``buffers``, helpers the module calls in ``rt``); ``compile`` writes it to
the disk cache under a key that hashes its text and the code generator's own
sources, and imports it. ``mathlib/`` is the vectorisable math library.

May import the layers below it (``config``, ``_version``, ``ir``, ``tracer``, ``passes``;
it uses ``config``, ``_version`` and ``ir``); never ``runtime`` or anything above.
"""
