"""Test-wide settings.

Compiling costs 0.3-1 s per generated module, so tests run transforms with
the NumPy interpreter unless marked ``@pytest.mark.compiled`` (the compiled ==
interpreter tests group many ops per compiled function). One disk cache is
shared by the whole run.
"""

import os
import tempfile

import pytest

os.environ.setdefault("FUSEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="fusegrad-test-cache-"))

import fusegrad as fg
from fusegrad import config


@pytest.fixture(autouse=True)
def _executor(request, monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", request.node.get_closest_marker("compiled") is None)


@pytest.fixture
def default_float64():
    """Eager Tensors default to float64 for the test (``pytest.mark.usefixtures``)."""
    old = fg.get_default_dtype()
    fg.set_default_dtype(fg.float64)
    yield
    fg.set_default_dtype(old)
