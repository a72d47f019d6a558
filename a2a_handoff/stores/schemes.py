"""Which store a URL names: a table of URL schemes, each with the factory that makes its store.

The project's four backends are registered here; another backend registers its own scheme
(`register_scheme("etcd", EtcdStore.from_url, "etcd://HOST:PORT")`) and is then opened by
`open_store`, `--store` and everything else that takes a store URL. A factory is called
with the whole URL and returns the store unopened; it imports what only it needs (the
optional extras), so a scheme costs nothing until it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from a2a_handoff.errors import StoreError
from a2a_handoff.stores.base import Store

Factory = Callable[[str], Store]


@dataclass(frozen=True)
class _Scheme:
    factory: Factory
    example: str  # how its URLs look, for the error that lists what is known


_SCHEMES: dict[str, _Scheme] = {}


def register_scheme(schemes: str | Iterable[str], factory: Factory, example: str) -> None:
    """Stores for URLs of `schemes` are made by `factory(url)`; `example` shows one such URL.
    A scheme registered again is replaced (the last registration wins)."""
    names = [schemes] if isinstance(schemes, str) else list(schemes)
    for name in names:
        _SCHEMES[name.lower()] = _Scheme(factory, example)


def open_store(url: str) -> Store:
    """The (unopened) store a URL names: `create_app` opens and closes it."""
    scheme = _SCHEMES.get(urlsplit(url).scheme.lower())
    if scheme is None:
        examples = list(dict.fromkeys(s.example for s in _SCHEMES.values()))
        known = ", ".join(examples[:-1]) + f" or {examples[-1]}" if examples else "none"
        raise StoreError(f"unknown store URL {url!r}: use {known}")
    return scheme.factory(url)


def _sqlite(url: str) -> Store:
    from a2a_handoff.stores.sqlite import SqliteTaskStore

    return SqliteTaskStore.from_url(url)


def _memory(url: str) -> Store:
    if url not in ("memory://", "memory:"):
        raise StoreError(f"a memory store's URL is memory:// (not {url!r})")
    from a2a_handoff.stores.memory import MemoryTaskStore

    return MemoryTaskStore()


def _redis(url: str) -> Store:
    from a2a_handoff.stores.redis import RedisTaskStore  # the optional `redis` extra

    return RedisTaskStore.from_url(url)


def _postgres(url: str) -> Store:
    from a2a_handoff.stores.postgres import PostgresTaskStore  # the `postgres` extra

    return PostgresTaskStore.from_url(url)


register_scheme("sqlite", _sqlite, "sqlite:///PATH")
register_scheme("memory", _memory, "memory://")
register_scheme(("redis", "rediss", "unix"), _redis, "redis://HOST:PORT/DB")
register_scheme(("postgresql", "postgres"), _postgres, "postgresql://USER@HOST:PORT/DB")
