from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import a2a_handoff


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in dir(a2a_handoff) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(a2a_handoff, name)).__name__ == "module"}
    assert sorted(a2a_handoff.__all__) == a2a_handoff.__all__
    assert set(a2a_handoff.__all__) == public - modules


def test_the_front_door_stays_small() -> None:
    # What a handler or app author needs first; every other name is its room's.
    assert len(a2a_handoff.__all__) <= 45, len(a2a_handoff.__all__)


def test_every_export_resolves() -> None:
    for name in a2a_handoff.__all__:
        assert getattr(a2a_handoff, name) is not None, name


def test_importing_the_package_leaves_slow_libraries_alone() -> None:
    # The handler API comes with the package; the server, stores and client (and the
    # libraries behind them) when one of their names is first looked up.
    code = (
        "import sys, a2a_handoff\n"
        "slow = ('jsonschema', 'opentelemetry', 'prometheus_client', 'openai', 'joserfc',"
        " 'httpx', 'aiosqlite', 'redis', 'starlette')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in slow))\n"
        "from a2a_handoff import create_app\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in slow[:4]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out == ["[]", "[]"], out


def test_a_name_looked_up_lazily_is_the_rooms_own() -> None:
    from a2a_handoff.server.app import create_app
    from a2a_handoff.stores import open_store

    assert a2a_handoff.create_app is create_app
    assert a2a_handoff.open_store is open_store


def test_an_adapter_loads_its_framework_only_when_one_of_its_names_is_used() -> None:
    code = (
        "import sys, a2a_handoff.adapters\n"
        "loaded = lambda: sorted(m for m in ('agents', 'langgraph') if m in sys.modules)\n"
        "print(loaded())\n"
        "from a2a_handoff.adapters import from_langgraph\n"
        "print(loaded())\n"
        "from a2a_handoff.adapters.langgraph import from_langgraph as deep\n"
        "print(from_langgraph is deep)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out == ["[]", "['langgraph']", "True"], out


def test_type_checkers_and_the_interpreter_see_the_same_lazy_names() -> None:
    # A lazy name is written twice, once for each reader: under TYPE_CHECKING (`X as X`) and
    # in the table `__getattr__` reads. The two say the same.
    tree = ast.parse(Path(a2a_handoff.__file__).read_text())
    checking = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    )
    typed = {
        (node.module, alias.name)
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    lazy = {(room, name) for room, names in a2a_handoff._LAZY.items() for name in names}
    assert typed == lazy
    assert len(typed) == sum(len(n.names) for n in checking.body if isinstance(n, ast.ImportFrom))


def test_each_eager_name_is_exported_the_way_type_checkers_read_it() -> None:
    tree = ast.parse(Path(a2a_handoff.__file__).read_text())
    imported = {
        alias.asname or alias.name: alias.asname == alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    eager = set(a2a_handoff.__all__) - set(a2a_handoff._ROOM_OF)
    assert {name for name in eager if not imported.get(name)} == set()
