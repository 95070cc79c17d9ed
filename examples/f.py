"""A function to inspect with `fusegrad dump examples/f.py:f --arg f64[1000] --grad`."""

import numpy as np


def f(x):
    return np.sum(np.sin(x) * x)
