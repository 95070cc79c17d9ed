"""Traced functions that draw random numbers through names bound at import time, which
no wrapper of the module attributes sees (used by ``test_side_effects_by_any_name``)."""

from __future__ import annotations

import random as _random
from random import Random as PyRandom
from random import random

import numpy as np
from numpy.random import RandomState, default_rng, uniform
from numpy.random import uniform as draw_uniform

import fusegrad.numpy as fnp


def numpy_from_import(x):
    return fnp.sum(x * uniform(size=3))


def numpy_from_import_renamed(x):
    return fnp.sum(x * draw_uniform(size=3))


def python_from_import(x):
    return fnp.sum(x * random())


def unseeded_default_rng(x):
    return fnp.sum(x * np.random.default_rng().normal(size=3))


def unseeded_default_rng_from_import(x):
    return fnp.sum(x * default_rng().normal(size=3))


def unseeded_random_state(x):
    return fnp.sum(x * RandomState().normal(size=3))


def unseeded_python_random(x):
    return fnp.sum(x * PyRandom().random())


DRAWS = [numpy_from_import, numpy_from_import_renamed, python_from_import,
         unseeded_default_rng, unseeded_default_rng_from_import, unseeded_random_state,
         unseeded_python_random]


def seeded_default_rng(x):
    return fnp.sum(x * default_rng(0).normal(size=3))


def seeded_random_state(x):
    return fnp.sum(x * RandomState(3).normal(size=3))


def seeded_random_state_keyword(x):
    return fnp.sum(x * np.random.RandomState(seed=3).normal(size=3))


def seeded_pcg(x):
    return fnp.sum(x * np.random.Generator(np.random.PCG64(7)).normal(size=3))


PURE = [seeded_default_rng, seeded_random_state, seeded_random_state_keyword, seeded_pcg]

__all__ = ["DRAWS", "PURE", "_random"]
