"""Fused IR -> LLVM IR -> machine code, and the math library.

``lean/`` is the code generator (llvmlite); ``compile`` holds the disk cache's
directory and the salt every cached name hashes; ``mathlib/`` is the vectorisable math
library (Numba functions, compiled once per machine to bitcode the generated code
links); ``rt_pool``/``pool_lower`` are the pooling kernels the eager Tensor runs.

May import the layers below it (``config``, ``_version``, ``ir``, ``tracer``, ``passes``;
it uses ``config``, ``_version`` and ``ir``); never ``runtime`` or anything above.
"""
