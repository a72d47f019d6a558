"""A run's journal keeps its own record of what is written: the task as last emitted and the
record as last committed change inside `runtime.journal` alone — a write made beside it (a
handoff's checkpoint, a delegation's record, a delivery giving the task back) is handed to
`Journal.adopt`, never set on its fields from outside; what a new task's first write carries
is given when the journal is made."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import a2a_handoff

PACKAGE = Path(a2a_handoff.__file__).parent
JOURNAL = PACKAGE / "runtime" / "journal.py"


def assigned(tree: ast.AST) -> Iterator[ast.Attribute]:
    """Every attribute the module assigns to (`x.y = …`, `x.y += …`, in tuples too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets.extend(target.elts)
            elif isinstance(target, ast.Attribute):
                yield target


def names_a_journal(node: ast.expr) -> bool:
    """`journal`, or `….journal`."""
    return (isinstance(node, ast.Name) and node.id == "journal") or (
        isinstance(node, ast.Attribute) and node.attr == "journal"
    )


def test_the_walk_sees_an_assignment_to_a_journal_s_field() -> None:
    # A guard on the test itself: the check below must see what it forbids.
    tree = ast.parse("run.journal.committed = record\njournal.task, x = task, 1")
    assert [a.attr for a in assigned(tree) if names_a_journal(a.value)] == ["committed", "task"]


def test_no_module_but_the_journal_sets_its_fields() -> None:
    # What it has written (`committed`, `task`) is adopted; what a new task's first write
    # carries (its key's window, its ledger row, whether a stream keeps its first events) is
    # given when the journal is made.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == JOURNAL:
            continue
        for target in assigned(ast.parse(path.read_text(), str(path))):
            if names_a_journal(target.value):
                found.append(f"{path.relative_to(PACKAGE)}:{target.lineno} {target.attr}")
    assert not found, f"set from outside the journal: {found}"
