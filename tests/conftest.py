"""Test-wide settings.

Which executor a test's transforms use: compiled code, the path users run, unless the
test is marked ``@pytest.mark.interpreted`` (tests of the NumPy interpreter itself, the
oracle compiled results are checked against). ``FUSEGRAD_TEST_EXECUTOR=interpreted``
runs every unmarked test with the interpreter instead (``compiled``: the default).

One disk cache is shared by the whole run.
"""

import os
import tempfile

import pytest

os.environ.setdefault("FUSEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="fusegrad-test-cache-"))

import fusegrad as fg
from fusegrad import config

_DEFAULT = os.environ.get("FUSEGRAD_TEST_EXECUTOR", "compiled")
if _DEFAULT not in ("compiled", "interpreted"):
    raise ValueError(f"FUSEGRAD_TEST_EXECUTOR={_DEFAULT!r}: choose compiled or interpreted")


def _compiled(node) -> bool:
    if node.get_closest_marker("compiled") is not None:
        return True
    if node.get_closest_marker("interpreted") is not None:
        return False
    return _DEFAULT == "compiled"


@pytest.fixture(autouse=True)
def _executor(request, monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", not _compiled(request.node))


@pytest.fixture
def default_float64():
    """Eager Tensors default to float64 for the test (``pytest.mark.usefixtures``)."""
    old = fg.get_default_dtype()
    fg.set_default_dtype(fg.float64)
    yield
    fg.set_default_dtype(old)
