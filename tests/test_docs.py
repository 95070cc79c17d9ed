"""The code blocks of README.md and docs/*.md run as written.

Every fenced ```python block of a file runs, in order, in one namespace per file,
as a reader pasting them one after another would run them (a later block may use
a name an earlier one defined). Tracebacks name the Markdown file and its own
line numbers. A one-line expression or ``print(...)`` followed by a comment that
shows its value (``x.grad  # tensor([2., 4.])``) has the value checked. A block
made of ``>>>`` lines runs as a doctest, its shown output checked. A plain ```
block whose first line is ``$ fusegrad dump ...`` runs that command in a process
of its own, from the repository root, and the output shown must match what it
prints (a line ``...`` stands for any number of lines; timings in stage headers
are not compared). Other plain blocks (shell commands without shown IR, error
texts, directory trees) and ```text blocks are not code and are left alone.

HTML comments on the lines right before a fence change how it runs:

- ``<!-- raises: ExceptionName -->``: the block shows failing code on purpose;
  it runs and must raise that exception (the file's later blocks still run). If
  the next block shows that error's text, the text must be the one raised, with
  ``/tmp/demo/NAME.py:LINE`` standing for the block's own line LINE.
- ``<!-- file: NAME.py -->``: the block is the file NAME.py that the page's
  ``$ fusegrad dump NAME.py:...`` commands read (saved as /tmp/demo/NAME.py in
  their shown output). It runs as well.
- ``<!-- no-run: reason -->``: the block cannot run as written (a signature
  list, an excerpt of generated code). It is not run; the reason is required.
  Prefer making a block runnable.

Transforms run with the NumPy interpreter, as in the rest of the suite, except
in the files of ``COMPILED``.
"""

from __future__ import annotations

import ast
import doctest
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import fusegrad as fg
from fusegrad import config

ROOT = Path(__file__).resolve().parents[1]
FILES = ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]

#: Files whose blocks run compiled, each with the reason.
COMPILED = {
    "docs/debugging.md": "compiled NaN debugging, and compile_stats() counts a compile",
}

FENCE = re.compile(
    r"^(?P<marks>(?:<!-- [\w-]+:[^\n]*?-->\n)*)"
    r"```(?P<lang>[^\n]*)\n(?P<body>.*?)^```[ \t]*$",
    re.M | re.S,
)
MARK = re.compile(r"<!-- ([\w-]+):([^\n]*?)-->")
MARKS = ("no-run", "raises", "file")
TIMING = re.compile(r"\(\d+(\.\d+)? ms\)")
DEMO = "/tmp/demo/"
SHOWN = re.compile(r"\s+# ((?:tensor\(|array\(|\[|-?\d).*?)\s*")
CLI = "import sys; from fusegrad.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass(frozen=True)
class Block:
    path: str
    line: int  # the line of the opening fence, 1-based
    lang: str
    body: str
    marks: dict[str, str]  # mark -> its text (a reason, an exception or a file name)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """``python``, ``doctest``, ``dump`` (a ``fusegrad dump`` with its output) or ``other``."""
        if self.lang == "python":
            return "doctest" if self.body.lstrip().startswith(">>>") else "python"
        if self.lang == "" and self.body.startswith("$ fusegrad dump "):
            return "dump"
        return "other"


def blocks(path: str) -> list[Block]:
    text = (ROOT / path).read_text()
    found = []
    for m in FENCE.finditer(text):
        fence_at = m.start("lang") - 3
        marks = {name: value.strip() for name, value in MARK.findall(m["marks"])}
        found.append(Block(path, text.count("\n", 0, fence_at) + 1, m["lang"].strip(),
                           m["body"], marks))
    return found


def runnable(path: str) -> list[Block]:
    return [b for b in blocks(path) if b.kind != "other" and "no-run" not in b.marks]


@pytest.fixture
def clean_state():
    """Each file runs as in a fresh process: counters at zero, global modes restored."""
    dtype = fg.get_default_dtype()
    fg.compile_stats(reset=True)
    yield
    fg.debug_nans(False)
    fg.autograd.set_detect_anomaly(False)
    fg.set_default_dtype(dtype)


def _shows_its_value(source: str) -> ast.Module:
    """The block's code, with each one-line ``EXPR  # VALUE`` and ``print(EXPR)  # VALUE``
    (VALUE a repr such as ``tensor([2., 4.])``, ``[0. 0. 0.]`` or a number) checked."""
    tree = ast.parse(source)
    lines = source.splitlines()
    for i, stmt in enumerate(tree.body):
        if not isinstance(stmt, ast.Expr) or stmt.lineno != stmt.end_lineno:
            continue
        shown = SHOWN.fullmatch(lines[stmt.lineno - 1][stmt.end_col_offset:])
        if shown is None:
            continue
        value, as_str = stmt.value, False
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "print":
            value, as_str = value.args[0], True
        check = ast.Call(ast.Name("__shown__", ast.Load()),
                         [value, ast.Constant(shown[1]), ast.Constant(as_str)], [])
        tree.body[i] = ast.copy_location(ast.Expr(check), stmt)
    return ast.fix_missing_locations(tree)


def _shown(value, text: str, as_str: bool) -> None:
    got = str(value) if as_str else repr(value)
    assert got == text, f"the comment shows {text}, the value is {got}"


def _run_python(block: Block, ns: dict, shown: Block | None) -> None:
    # Padding keeps the Markdown file's line numbers in tracebacks and IR locations.
    code = compile(_shows_its_value("\n" * block.line + block.body), block.path, "exec")
    ns["__shown__"] = _shown
    expected = block.marks.get("raises")
    if expected is None:
        exec(code, ns)
        return
    with pytest.raises(Exception) as info:
        exec(code, ns)
    error = f"{type(info.value).__name__}: {info.value}"
    assert error.startswith(expected + ":"), f"{block.where}: expected {expected}: {error}"
    if shown is not None and shown.kind == "other" and shown.body.startswith(expected + ":"):
        assert _error_lines(shown.body, block) == _error_lines(error, block), (
            f"{block.where}: the error shown at {shown.where} is not the one raised:\n{error}")


def _error_lines(text: str, block: Block) -> list[str]:
    """An error message with the example's file named ``FILE`` and its lines counted in the block.

    The page shows the file a reader saved the example in (``/tmp/demo/*.py``,
    line 1 the block's first line); the test runs it as the Markdown file.
    Traceback frames of other files (the test harness) are dropped.
    """
    doc = block.path

    def place(m: re.Match) -> str:
        line = int(m[3]) - (block.line if m[1] == doc else 0)
        return f"FILE{m[2]}{line}"

    lines, keep = [], True
    for line in text.splitlines():
        frame = re.match(r'\s*File "([^"]*)"', line)
        if frame:
            keep = frame[1] == doc or frame[1].startswith(DEMO)
        elif not line.startswith("    "):
            keep = True
        if keep:
            lines.append(re.sub(rf'(/tmp/demo/\w+\.py|{re.escape(doc)})(:|", line )(\d+)',
                                place, line))
    return lines


def _run_doctest(block: Block, ns: dict) -> None:
    test = doctest.DocTestParser().get_doctest(block.body, ns, block.where, block.path, block.line)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.write, clear_globs=False)
    assert result.failed == 0, out.getvalue()
    ns.update(test.globs)


def _matches(shown: list[str], got: list[str]) -> bool:
    """``shown`` is ``got`` with runs of lines replaced by ``...`` lines."""
    segments = [[]]
    for line in shown:
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    if len(segments) == 1:
        return shown == got
    first, *middle, last = segments
    if got[:len(first)] != first:
        return False
    pos = len(first)
    for seg in middle:
        for s in range(pos, len(got) - len(seg) + 1):
            if got[s:s + len(seg)] == seg:
                pos = s + len(seg)
                break
        else:
            return False
    return len(got) - len(last) >= pos and got[len(got) - len(last):] == last


def _run_dump(block: Block, saved: Path) -> None:
    command, *shown = block.body.splitlines()
    argv = shlex.split(command[len("$ fusegrad "):])
    argv = [str(saved / a) if (saved / a.partition(":")[0]).is_file() else a for a in argv]
    # A process of its own, as from a shell: this one's counters and caches stay untouched.
    run = subprocess.run([sys.executable, "-c", CLI, *argv], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, f"{block.where}: `{command}` failed:\n{run.stderr}"
    printed = run.stdout.replace(f"{saved}/", DEMO)
    got = [TIMING.sub("(ms)", line) for line in printed.splitlines()]
    want = [TIMING.sub("(ms)", line) for line in shown]
    assert _matches(want, got), f"{block.where}: `{command}` printed\n{run.stdout}"


@pytest.mark.parametrize("path", FILES)
def test_doc_blocks_run(path, clean_state, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(config, "DISABLE_JIT", path not in COMPILED)
    ns: dict = {"__name__": "__main__"}
    every = blocks(path)
    for i, block in enumerate(every):
        if block.kind == "other" or "no-run" in block.marks:
            continue
        if "file" in block.marks:
            (tmp_path / block.marks["file"]).write_text(block.body)
        try:
            if block.kind == "dump":
                _run_dump(block, tmp_path)
            elif block.kind == "doctest":
                _run_doctest(block, ns)
            else:
                _run_python(block, ns, every[i + 1] if i + 1 < len(every) else None)
        except BaseException as e:
            raise AssertionError(f"the {block.kind} block at {block.where} failed") from e


@pytest.mark.parametrize("path", FILES)
def test_marks_are_known_and_give_a_reason(path):
    for block in blocks(path):
        for mark, text in block.marks.items():
            assert mark in MARKS, f"{block.where}: unknown mark {mark!r} (use {MARKS})"
            assert text, f"{block.where}: `{mark}:` needs a reason, an exception or a file name"
            assert block.kind != "other", f"{block.where}: a mark on a block that never runs"
        if {"raises", "file"} & block.marks.keys():
            assert block.kind == "python", f"{block.where}: `raises`/`file` mark python blocks"


def test_every_block_is_counted():
    """How many blocks run per file, and which are kept out on purpose (update with the docs)."""
    runs = {p: len(runnable(p)) for p in FILES}
    assert {p: n for p, n in runs.items() if n} == {
        "README.md": 9, "docs/architecture.md": 2, "docs/complex.md": 6,
        "docs/control_flow.md": 4, "docs/distributed.md": 1,
        "docs/debugging.md": 4, "docs/eager_jit.md": 1, "docs/forward_mode.md": 2,
        "docs/performance.md": 1, "docs/random.md": 2, "docs/scipy.md": 6, "docs/training.md": 5,
        "docs/vmap.md": 1,
        "docs/linalg.md": 2,
    }
    no_run = sorted((b.path, b.marks["no-run"]) for p in FILES for b in blocks(p)
                    if "no-run" in b.marks)
    assert no_run == [
        ("docs/control_flow.md", "an excerpt of generated code"),
        ("docs/control_flow.md", "call signatures, not a program"),
        ("docs/mathlib.md", "a sketch of the loops the code generator writes"),
    ], no_run
