"""The compile cache trusts only a private directory of this user (``codegen/compile.py``).

A directory others can write to, or owned by someone else, is refused (one
warning, a private fallback); a symlinked reproducer file is replaced, not followed.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from fusegrad import config
from fusegrad.codegen import compile as cg
from fusegrad.ir import Function
from fusegrad.runtime import compiled
from fusegrad.tracer import trace


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory setting (not created yet) and no fallback chosen."""
    d = tmp_path / "cache"
    monkeypatch.setattr(config, "CACHE_DIR", str(d))
    monkeypatch.setattr(cg, "_fallback_dir", None)
    return d


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_cache_directory_is_private(cache):
    assert cg._directory() == str(cache)
    assert _mode(cache) == 0o700
    assert _mode(cache / "__pycache__") == 0o700


@pytest.mark.parametrize("where", ["dir", "pycache"])
def test_a_group_writable_directory_is_refused(cache, where):
    cache.mkdir(mode=0o700)
    target = cache if where == "dir" else cache / "__pycache__"
    target.mkdir(exist_ok=True)
    os.chmod(target, 0o777)
    with pytest.warns(RuntimeWarning, match="writable by group or others") as record:
        got = cg._directory()
        cg._directory()
    assert len(record) == 1
    assert got != str(cache) and _mode(got) == 0o700


def test_a_checked_directory_is_looked_at_again(cache):
    # checked once per process, then only stat-ed: a change of its mode is still seen
    assert cg._directory() == str(cache) and cg._directory() == str(cache)
    os.chmod(cache, 0o777)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        assert cg._directory() != str(cache)


def test_a_directory_of_another_user_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache).st_uid + 1)
    with pytest.warns(RuntimeWarning, match="owned by another user"):
        assert cg._directory() != str(cache)


def test_a_symlinked_reproducer_is_replaced_not_followed(cache, tmp_path):
    fn: Function = trace(lambda x: x * 2.0, np.ones(2))
    msg = str(compiled._internal(fn, ValueError("boom")))
    path = msg.split("The IR that failed is in ")[1].split(".fgir")[0] + ".fgir"
    target = tmp_path / "victim"
    target.write_text("precious")
    os.unlink(path)
    os.symlink(target, path)
    compiled._internal(fn, ValueError("boom"))
    assert target.read_text() == "precious"
    assert not os.path.islink(path)
    with open(path) as f:
        assert "mul" in f.read()
