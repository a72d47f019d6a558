"""The server room stays readable: no function in `a2a_handoff/server/` is over 60 lines.

Counted from its `def` (decorators aside) to its last line, docstring and nested functions
included — a function that needs more is split into named helpers, as `create_app` is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import a2a_handoff

SERVER = Path(a2a_handoff.__file__).parent / "server"
MOST = 60


def long_functions(root: Path, most: int) -> list[str]:
    """`path:line name (N lines)` of every function under `root` longer than `most` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > most:
                    where = path.relative_to(root.parent)
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_the_server_room_is_over_60_lines() -> None:
    assert long_functions(SERVER, MOST) == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST))
    (tmp_path / "long.py").write_text(f"def fits():\n    pass\n\n\nasync def grown():\n{body}\n")
    assert long_functions(tmp_path, MOST) == [f"{tmp_path.name}/long.py:5 grown (61 lines)"]
