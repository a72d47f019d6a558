"""ARCHITECTURE.md names every module of the package: a new one is placed on the map."""

from __future__ import annotations

from pathlib import Path

import a2a_handoff

PACKAGE = Path(a2a_handoff.__file__).parent
MAP = (PACKAGE.parent / "ARCHITECTURE.md").read_text()


def test_every_module_is_on_the_map() -> None:
    # File names are unique across rooms (test_layers), so a name on the map is one module.
    modules = sorted(
        p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"
    )
    missing = [m for m in modules if Path(m).name not in MAP]
    assert not missing, f"ARCHITECTURE.md does not name: {missing}"
