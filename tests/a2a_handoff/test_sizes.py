"""A guard against runaway growth, not a cap to fit under.

Modules are split where a concept ends, and a long module that is one concept stays whole
(starlette's `routing.py` is one). What this test catches is the module, class or function
that has grown far past anything in the package — several concepts grown into one — at about
twice the size of the longest the package holds when it was written: 800 lines a module, 500
a class, 120 a function. Counted from the `class`/`def` to its last line (decorators aside),
docstrings and nested functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import a2a_handoff

PACKAGE = Path(a2a_handoff.__file__).parent
RUNAWAY_MODULE = 800
RUNAWAY_CLASS = 500
RUNAWAY_FUNCTION = 120


def grown(root: Path) -> dict[str, int]:
    """`room/file.py` or `room/file.py name` → lines, for every module, class and function
    under `root` past its runaway size."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text()
        if (lines := len(text.splitlines())) > RUNAWAY_MODULE:
            found[name] = lines
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ClassDef):
                most = RUNAWAY_CLASS
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                most = RUNAWAY_FUNCTION
            else:
                continue
            if (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > most:
                found[f"{name} {node.name}"] = lines
    return found


def test_nothing_in_the_package_has_run_away() -> None:
    assert grown(PACKAGE) == {}


def test_the_guard_sees_a_runaway_module_class_and_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(RUNAWAY_FUNCTION))
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "long.py").write_text(f"def fits():\n    pass\n\n\ndef grew():\n{body}\n")
    fields = "\n".join(f"    x{i} = {i}" for i in range(RUNAWAY_CLASS))
    (tmp_path / "big.py").write_text(f"class Small:\n    pass\n\n\nclass Big:\n{fields}\n")
    (tmp_path / "huge.py").write_text("x = 1\n" * (RUNAWAY_MODULE + 1))
    assert grown(tmp_path) == {
        "big.py Big": RUNAWAY_CLASS + 1,
        "huge.py": RUNAWAY_MODULE + 1,
        "room/long.py grew": RUNAWAY_FUNCTION + 1,
    }


def test_no_formatter_opt_out_anywhere() -> None:
    # Code is laid out as the formatter lays it out, in the package and around it (servers,
    # orchestrator, bench, tests): never squeezed to fit.
    opt_outs = ("fmt: " + "skip", "fmt: " + "off")
    repo = PACKAGE.parent
    found = [
        f"{path.relative_to(repo)}:{number}"
        for room in ("a2a_handoff", "servers", "orchestrator", "bench", "tests", "scripts")
        for path in sorted((repo / room).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if any(opt_out in line for opt_out in opt_outs)
    ]
    assert found == []
