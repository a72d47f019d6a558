"""Store URLs by scheme (a third party's too), and what each backend declares it offers."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_handoff.errors import StoreError
from a2a_handoff.stores import (
    KeepsKeyFile,
    MemoryTaskStore,
    Pooled,
    RefusesLegacyKeys,
    Store,
    ephemeral,
    open_store,
    register_scheme,
    shared,
)
from a2a_handoff.stores import schemes as scheme_table


class ThirdPartyStore(MemoryTaskStore):
    """A backend of someone else's: the memory store under a URL of its own."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url


def test_a_scheme_a_third_party_registers_is_opened_like_ours() -> None:
    before = dict(scheme_table._SCHEMES)
    try:
        register_scheme("vault", ThirdPartyStore, "vault://NAME")
        store = open_store("vault://tasks")
        assert isinstance(store, ThirdPartyStore)
        assert store.url == "vault://tasks"
        with pytest.raises(StoreError, match=r"vault://NAME"):  # listed among the known
            open_store("nope://x")
    finally:
        scheme_table._SCHEMES.clear()
        scheme_table._SCHEMES.update(before)


def test_an_unknown_url_names_every_scheme_known() -> None:
    with pytest.raises(StoreError) as refused:
        open_store("mysql://db")
    said = str(refused.value)  # (the docs' example may have registered one more)
    assert said.startswith("unknown store URL 'mysql://db': use sqlite:///PATH, memory://,")
    assert "redis://HOST:PORT/DB" in said
    assert "postgresql://USER@HOST:PORT/DB" in said
    with pytest.raises(StoreError, match="memory://"):
        open_store("memory://elsewhere")


def test_each_backend_declares_what_it_offers_beyond_the_contract(tmp_path: Path) -> None:
    memory = open_store("memory://")
    sqlite = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    redis = open_store("redis://127.0.0.1:1/0")  # made, never opened: nothing is reached
    postgres = open_store("postgresql://nobody@127.0.0.1:1/none")
    stores: list[Store] = [memory, sqlite, redis, postgres]
    assert [ephemeral(s) for s in stores] == [True, False, False, False]
    assert [shared(s) for s in stores] == [False, False, True, True]
    assert [isinstance(s, KeepsKeyFile) for s in stores] == [False, True, False, False]
    assert [isinstance(s, Pooled) for s in stores] == [False, False, False, True]
    assert [isinstance(s, RefusesLegacyKeys) for s in stores] == [False, False, True, False]
