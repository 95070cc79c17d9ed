"""Test-wide settings.

Which executor a test's transforms use:

- ``@pytest.mark.compiled``: compiled code (the compiled == interpreter tests, and
  whatever checks the code generator);
- ``@pytest.mark.interpreted``: the NumPy interpreter (tests of the interpreter itself);
- otherwise compiled code for the directories in ``COMPILED_DIRS`` and the interpreter
  elsewhere. ``FUSEGRAD_TEST_EXECUTOR=compiled`` runs every unmarked test compiled
  (``interpreted`` every one interpreted), for a full run of the path users take.

One disk cache is shared by the whole run.
"""

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("FUSEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="fusegrad-test-cache-"))

import fusegrad as fg
from fusegrad import config

#: test directories whose unmarked tests run compiled code by default (those where it
#: costs the run little; the others would add about five minutes: ``FUSEGRAD_TEST_EXECUTOR``)
COMPILED_DIRS = frozenset({"autograd", "complex", "distributed", "ir", "nn", "optim",
                           "random", "runtime", "semantics", "serialization", "tracer",
                           "utils"})
_TESTS = Path(__file__).resolve().parent
_DEFAULT = os.environ.get("FUSEGRAD_TEST_EXECUTOR", "default")
if _DEFAULT not in ("default", "compiled", "interpreted"):
    raise ValueError(f"FUSEGRAD_TEST_EXECUTOR={_DEFAULT!r}: choose compiled, interpreted "
                     "or default")


def _compiled(node) -> bool:
    if node.get_closest_marker("compiled") is not None:
        return True
    if node.get_closest_marker("interpreted") is not None:
        return False
    if _DEFAULT != "default":
        return _DEFAULT == "compiled"
    parts = Path(str(node.path)).resolve().relative_to(_TESTS).parts
    return len(parts) > 1 and parts[0] in COMPILED_DIRS


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
