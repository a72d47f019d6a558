"""Store URLs: `open_store` looks the scheme up in one table, which a third-party backend
adds its own scheme to; a taken scheme or a name that is no scheme is refused, and an unknown
URL is answered with the URLs there are."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_handoff.errors import StoreError
from a2a_handoff.stores import (
    MemoryTaskStore,
    SqliteTaskStore,
    Store,
    open_store,
    register_scheme,
    registered_schemes,
)
from a2a_handoff.stores import schemes as table

BUILT_IN = "sqlite:///PATH, memory://, redis://HOST:PORT/DB or postgresql://USER@HOST:PORT/DB"


OWN = ("sqlite", "memory", "redis", "rediss", "unix", "postgresql", "postgres")


@pytest.fixture(autouse=True)
def own_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's own schemes alone (whatever another test registered in this process),
    and what a test registers gone after it."""
    monkeypatch.setattr(table, "_SCHEMES", {scheme: table._SCHEMES[scheme] for scheme in OWN})


class ScratchStore(MemoryTaskStore):
    """A third party's backend: made from its URL, which it keeps."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url


def test_a_registered_scheme_opens_its_urls_with_its_factory() -> None:
    register_scheme("scratch", ScratchStore, example="scratch://NAME")
    store = open_store("scratch://orders")
    assert isinstance(store, ScratchStore)
    assert store.url == "scratch://orders"
    assert isinstance(open_store("SCRATCH://x"), ScratchStore)  # schemes know no case
    assert "scratch" in registered_schemes()
    with pytest.raises(StoreError) as refused:
        open_store("nope://x")
    assert (
        str(refused.value)
        == f"unknown store URL 'nope://x': use {BUILT_IN.replace(' or ', ', ')} or scratch://NAME"
    )


def test_the_project_s_own_schemes_are_there(tmp_path: Path) -> None:
    assert set(registered_schemes()) >= {"sqlite", "memory", "redis", "postgresql"}
    assert isinstance(open_store(f"sqlite:///{tmp_path}/a.db"), SqliteTaskStore)
    assert isinstance(open_store("memory://"), MemoryTaskStore)
    with pytest.raises(StoreError, match="no path nor options"):
        open_store("memory://somewhere")


def test_an_unknown_url_is_answered_with_the_urls_there_are() -> None:
    for url in ("mysql://db/x", "data/agent.db", ""):
        with pytest.raises(StoreError) as refused:
            open_store(url)
        assert str(refused.value) == f"unknown store URL {url!r}: use {BUILT_IN}"


def test_a_taken_scheme_is_replaced_only_when_asked() -> None:
    def other(url: str) -> Store:
        return ScratchStore(url)

    with pytest.raises(ValueError, match="'sqlite' is taken already"):
        register_scheme("sqlite", other)
    assert isinstance(open_store("sqlite:///x.db"), SqliteTaskStore)
    register_scheme("scratch", other)
    register_scheme("scratch", other)  # the same factory again: nothing changes
    register_scheme("sqlite", other, replace=True)
    assert isinstance(open_store("sqlite:///x.db"), ScratchStore)


@pytest.mark.parametrize("name", ["", "My Store", "1st", "scratch://", "Scratch"])
def test_a_name_that_is_no_url_scheme_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a URL scheme"):
        register_scheme(name, ScratchStore)
