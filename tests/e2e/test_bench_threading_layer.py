"""``fusegrad bench --in-process`` leaves Numba on fusegrad's threading layer.

The machine report asks Numba for its thread count; asking Numba first would start
Numba's default layer, GNU OpenMP when TBB's library is not on the loader's path, and a
process forked after that loses any child that runs a parallel loop. The bench runs in a
fresh interpreter here, since a layer, once started, stays for the process's life.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.runtime.test_threading_layer import _has_tbb

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent("""
    import numba

    from fusegrad.bench import _suite
    from fusegrad.cli import main

    assert main(["bench", "--quick", "--only", "W4", "--in-process", "--rounds", "1",
                 "--impl", "fusegrad,numpy,numba", "--json", "w4.json"]) == 0
    info = _suite("report").process_info("t")
    print("LAYER", numba.threading_layer())
    from fusegrad.runtime import threading_layer

    assert info.get("numba_threading_layer") == threading_layer.layer()
    assert info["numba_num_threads"] >= 1
""")


def test_bench_in_process_starts_numba_on_fusegrads_layer(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("NUMBA_THREADING_LAYER", None)  # the default: fusegrad chooses
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("LAYER ")]
    name = line.split()[1]
    assert name != "omp"  # fusegrad never starts OpenMP by itself: it does not survive fork
    assert name == ("tbb" if _has_tbb() else "workqueue")
    assert proc.returncode == 0, proc.stderr[-3000:]
