"""A cheap call signature for the common ``jit`` call: arrays and tuples of arrays.

``jit`` keys its traces by the flattened argument structure, shapes and dtypes;
flattening a pytree costs tens of microseconds per call. For arguments that are
plain ndarrays or tuples/lists of them, ``signature`` builds an equivalent key
directly and ``leaves`` the flat argument list, or ``signature`` returns None and
the general path is taken.
"""

from __future__ import annotations

import numpy as np


def signature(args: tuple):
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.shape, a.dtype))
        elif t is tuple or t is list:
            sub = []
            for b in a:
                if type(b) is not np.ndarray:
                    return None
                sub.append((b.shape, b.dtype))
            key.append((t, tuple(sub)))
        else:
            return None
    return tuple(key)


def leaves(args: tuple) -> list:
    out = []
    for a in args:
        if type(a) is np.ndarray:
            out.append(a)
        else:
            out.extend(a)
    return out
