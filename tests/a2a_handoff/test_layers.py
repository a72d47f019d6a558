"""The package's shape: imports point one way (server → runtime → handoff → protocol, stores),
and no module imports itself back through others.

Every import counts — at the top, inside functions, under `TYPE_CHECKING`: a lazy or
type-only import that dodges a circle is still a circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import a2a_handoff

PACKAGE = Path(a2a_handoff.__file__).parent

# Rooms from the bottom up: a module may import its own room and rooms listed before its own,
# never a room after it, nor a sibling on the same line.
LAYERS: list[set[str]] = [
    {"ids", "failpoints", "errors", "exits", "version", "secrets"},
    # RFC 8785 canonical JSON: the bytes that are signed, and an action's fingerprint.
    {"canonical"},
    {"protocol"},
    # Keys, signatures and the trust list: below the store (which keeps an agent's keys)
    # and the client (which verifies cards); I/O is injected into it, never imported.
    {"trust"},
    # Metrics, log lines with ids, trace context: called from every room above, importing
    # none of them (the wire models only).
    {"observe"},
    # An operator's decision on an escalation: what a human agent signs, what an agent checks.
    {"decisions"},
    {"stores", "client", "contracts", "auth", "escalation"},
    # What a handler returns, what a delegation gives back to it, an artifact sent in chunks.
    {"outcomes", "delegated", "artifact_stream"},
    # The ports a handler's context asks the runtime through (`agent.TaskPort`: the step's
    # events, and a port for each thing a handler reaches beyond its step).
    {"task_port"},
    # What a handler reaches beyond its step, one object each over its port: handing off
    # (`ctx.handoffs`), asking another agent (`ctx.delegation`), MCP tools (`ctx.tools`),
    # asking a human (`ctx.escalation`, with the guard that holds an action back).
    {"handoff_routes", "delegation", "tool_calls", "guards"},
    # The handler API: below the handoff room, which it reaches only through the ports the
    # runtime implements (`agent.TaskPort`).
    {"agent"},
    {"handoff"},
    # Language-model agents build on the agent API only: siblings of the runtime, which
    # runs them without knowing them.
    {"runtime", "llm"},
    # Agents written with other frameworks (each module imports its own, when used), and push
    # notifications: a task's events to webhooks, from the store (beside the runtime).
    {"adapters", "push"},
    {"server"},
    {"__init__", "__main__"},
]
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a package module in the file, wherever it stands."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("a2a_handoff"):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if not base.startswith("a2a_handoff"):
                continue
            for alias in node.names:  # `from pkg import module` imports the module
                candidate = f"{base}.{alias.name}"
                yield node.lineno, candidate if candidate in MODULES else base


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}
GRAPH: dict[str, set[str]] = {
    module_name(p): {m for _, m in imports_of(p) if m in MODULES} for p in PACKAGE.rglob("*.py")
}


def test_the_graph_sees_every_module_and_its_imports() -> None:
    # A guard on the test itself: a parser that found nothing would pass everything below.
    assert "a2a_handoff.runtime.tasks" in GRAPH
    assert "a2a_handoff.handoff.handoffs" in GRAPH["a2a_handoff.runtime.tasks"]
    assert "a2a_handoff.protocol.models" in GRAPH["a2a_handoff.handoff.envelope"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=module_name)
def test_imports_point_down(path: Path) -> None:
    importer = module_name(path)
    room = room_of(importer)
    assert room in RANK, f"{importer}: room {room!r} has no place in LAYERS"
    upward = [
        f"line {line}: {target}"
        for line, target in imports_of(path)
        if room_of(target) != room and RANK[room_of(target)] >= RANK[room]
    ]
    assert not upward, f"{importer} imports upward or sideways: {upward}"


def test_no_module_imports_itself_back() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import circles: " + "; ".join(" → ".join(c) for c in cycles)


def test_private_modules_are_imported_only_from_their_room() -> None:
    # `room/_name.py` is the room's own: another room goes through the room's `__init__`
    # (or a public module of it), so the room may change its insides freely.
    assert "a2a_handoff.server._rest" in GRAPH["a2a_handoff.server.app"]  # (seen at all)
    reached = sorted(
        f"{importer} → {target}"
        for importer, targets in GRAPH.items()
        for target in targets
        if target.rpartition(".")[2].startswith("_")
        and not target.endswith("__init__")
        and room_of(target) != room_of(importer)
    )
    assert not reached, f"private modules imported from another room: {reached}"


# The handler API: what a handler author imports, and what it drags in. Never the client, the
# stores or the trust room (network, databases, keys), not even for a type.
HANDLER_API = "a2a_handoff.agent"
NOT_FOR_HANDLERS = ("client", "stores", "trust")


def closure(module: str) -> set[str]:
    """Every package module `module` imports, directly or through others (any import)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for target in GRAPH.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_handler_api_imports_no_client_store_or_trust() -> None:
    reached = closure(HANDLER_API)
    assert "a2a_handoff.outcomes" in reached  # (the walk follows imports at all)
    dragged = sorted(m for m in reached if room_of(m) in NOT_FOR_HANDLERS)
    assert not dragged, f"{HANDLER_API} drags in: {dragged}"


def test_importing_the_handler_api_loads_no_client_store_or_trust() -> None:
    # At run time too: the packages' __init__ modules run on the way in.
    code = (
        f"import sys, {HANDLER_API}\n"
        "print(sorted(m for m in sys.modules if m.startswith('a2a_handoff')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = ast.literal_eval(done.stdout.strip())
    assert HANDLER_API in loaded
    dragged = [m for m in loaded if room_of(m) in NOT_FOR_HANDLERS]
    assert not dragged, f"importing {HANDLER_API} loads {dragged}"


def test_layers_name_every_room() -> None:
    rooms = {room_of(m) for m in MODULES}
    assert rooms <= set(RANK), f"rooms without a layer: {sorted(rooms - set(RANK))}"


# The example agents and the orchestrator are users of the library: they import the front
# door (`a2a_handoff`) and public rooms (`a2a_handoff.<room>`), never a module inside a room.
ROOT = PACKAGE.parent
USERS = sorted(p for d in ("servers", "orchestrator") for p in (ROOT / d).rglob("*.py"))


def library_imports(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name) of every import of the library in a user's file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "a2a_handoff":
                    yield node.lineno, alias.name, None
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and (node.module or "").split(".")[0] == "a2a_handoff"
        ):
            for alias in node.names:
                yield node.lineno, node.module or "", alias.name


def test_the_users_are_seen() -> None:
    found = {m for p in USERS for _, m, _ in library_imports(p)}
    assert "a2a_handoff" in found
    assert len(USERS) > 10


@pytest.mark.parametrize("path", USERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_users_import_only_the_front_door_and_public_rooms(path: Path) -> None:
    deep = [
        f"line {line}: {module}" + (f" import {name}" if name else "")
        for line, module, name in library_imports(path)
        if module.count(".") > 1
        or any(part.startswith("_") for part in module.split(".")[1:])
        or (name is not None and name.startswith("_") and not name.startswith("__"))
    ]
    assert not deep, f"{path.relative_to(ROOT)} reaches inside a room: {deep}"


# One name, one file: a module's name says what it holds, so no two rooms name a file alike
# (`server/config.py` beside `push/config.py` says neither). A leading `_` does not make a
# name another: `_events.py` and `events.py` are still both "events".
# Still repeated, so this list can only shrink (it is empty: keep it so).
SHARED_NAMES_LEFT: set[str] = set()


def shared_names(root: Path) -> dict[str, list[str]]:
    """Each file name (less a leading `_`) that stands in more than one folder under `root`."""
    places: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            name = path.name.lstrip("_")
            places.setdefault(name, []).append(str(path.relative_to(root)))
    return {name: where for name, where in places.items() if len(where) > 1}


def test_no_two_rooms_name_a_file_alike() -> None:
    shared = shared_names(PACKAGE)
    assert set(shared) <= SHARED_NAMES_LEFT, {
        n: w for n, w in shared.items() if n not in SHARED_NAMES_LEFT
    }
    # The list only shrinks: a name no longer shared leaves it.
    assert set(shared) >= SHARED_NAMES_LEFT, f"no longer shared: {SHARED_NAMES_LEFT - set(shared)}"


def test_the_name_check_sees_a_repeated_name(tmp_path: Path) -> None:
    for where in ("a/config.py", "b/_config.py", "b/pusher.py", "c/__init__.py", "d/__init__.py"):
        (tmp_path / where).parent.mkdir(exist_ok=True)
        (tmp_path / where).write_text("")
    assert shared_names(tmp_path) == {"config.py": ["a/config.py", "b/_config.py"]}
