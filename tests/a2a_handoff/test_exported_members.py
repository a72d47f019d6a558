from __future__ import annotations

import a2a_handoff


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in dir(a2a_handoff) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(a2a_handoff, name)).__name__ == "module"}
    assert sorted(a2a_handoff.__all__) == a2a_handoff.__all__
    assert set(a2a_handoff.__all__) == public - modules


def test_every_export_resolves() -> None:
    for name in a2a_handoff.__all__:
        assert getattr(a2a_handoff, name) is not None, name
