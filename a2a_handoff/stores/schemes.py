"""Store URLs: one table from a URL's scheme to the factory that makes the store it names.

`open_store(url)` looks the URL's scheme up there. The project's own are `sqlite:`, `memory:`,
`redis:` (with `rediss:` and `unix:`) and `postgresql:` (with `postgres:`); a third-party
backend adds its own with `register_scheme`. A factory takes the whole URL and returns the
store unopened (`create_app` opens and closes it). Each factory imports its backend when first
called, so an optional driver (redis, asyncpg) is loaded only by a URL that needs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from a2a_handoff.errors import StoreError
from a2a_handoff.stores.base import Store

StoreFactory = Callable[[str], Store]
"""Makes the (unopened) store a URL names; StoreError for a URL it cannot take."""

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")  # RFC 3986, lower case


@dataclass(frozen=True, slots=True)
class _Scheme:
    factory: StoreFactory
    example: str  # a URL of it, as the unknown-URL error shows it ("": not shown)


_SCHEMES: dict[str, _Scheme] = {}


def register_scheme(
    scheme: str, factory: StoreFactory, *, example: str | None = None, replace: bool = False
) -> None:
    """Let `open_store` open URLs of `scheme` (`"mystore"` for `mystore://…`) with `factory`.

    `example` is what the error for an unknown URL shows of it (`mystore://…` by default, ""
    for nothing: an alias). ValueError for a name that is not a lower-case URL scheme, or
    for one another factory has, unless `replace`.
    """
    if not _SCHEME.fullmatch(scheme):
        raise ValueError(f"{scheme!r} is not a URL scheme (lower case, as `mystore`)")
    taken = _SCHEMES.get(scheme)
    if taken is not None and taken.factory is not factory and not replace:
        raise ValueError(
            f"the store URL scheme {scheme!r} is taken already: give replace=True to replace it"
        )
    _SCHEMES[scheme] = _Scheme(factory, f"{scheme}://…" if example is None else example)


def registered_schemes() -> list[str]:
    """The schemes `open_store` knows, sorted."""
    return sorted(_SCHEMES)


def open_store(url: str) -> Store:
    """The (unopened) store a URL names: `create_app` opens and closes it."""
    scheme, colon, _ = url.partition(":")
    found = _SCHEMES.get(scheme.lower()) if colon else None
    if found is None:
        shown = [s.example for s in _SCHEMES.values() if s.example]
        known = shown[-1] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        raise StoreError(f"unknown store URL {url!r}: use {known}")
    return found.factory(url)


# -- the project's own backends ---------------------------------------------------------------


def _sqlite(url: str) -> Store:
    from a2a_handoff.stores.sqlite import SqliteTaskStore

    return SqliteTaskStore.from_url(url)


def _memory(url: str) -> Store:
    from a2a_handoff.stores.memory import MemoryTaskStore

    if url not in ("memory://", "memory:"):
        raise StoreError(f"a memory store takes no path nor options: memory://, not {url!r}")
    return MemoryTaskStore()


def _redis(url: str) -> Store:
    from a2a_handoff.stores.redis import RedisTaskStore  # the optional `redis` extra

    return RedisTaskStore.from_url(url)


def _postgres(url: str) -> Store:
    from a2a_handoff.stores.postgres import PostgresTaskStore  # the `postgres` extra

    return PostgresTaskStore.from_url(url)


register_scheme("sqlite", _sqlite, example="sqlite:///PATH")
register_scheme("memory", _memory, example="memory://")
register_scheme("redis", _redis, example="redis://HOST:PORT/DB")
register_scheme("rediss", _redis, example="")
register_scheme("unix", _redis, example="")  # Redis on a Unix socket
register_scheme("postgresql", _postgres, example="postgresql://USER@HOST:PORT/DB")
register_scheme("postgres", _postgres, example="")
