"""Agent addresses that name several replicas, and failing over between them.

An agent's address may list several URLs, comma-separated (`http://a:8101/,http://b:8101/`).
A call goes to the replica that answered last and moves to the next one when a replica is
down — its breaker open, or the connection refused, so the request never reached it — or,
for idempotent calls, on any transport failure: the message id or idempotency key makes the
repeat return the same task, so failing over never duplicates work.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TypeVar
from urllib.parse import urlsplit

import httpx

from a2a_handoff.errors import CircuitOpenError, UnavailableError

T = TypeVar("T")


def replicas(address: str) -> list[str]:
    """The URLs an agent address names: one, or several comma-separated replicas."""
    return list(_replicas(address))


@functools.lru_cache(maxsize=1024)
def _replicas(address: str) -> tuple[str, ...]:
    urls = tuple(url.strip() for url in address.split(",") if url.strip())
    return urls or (address,)


def never_arrived(exc: BaseException) -> bool:
    """The request cannot have reached the replica: safe to send elsewhere, whatever it is
    — not on this attempt, nor on any the call made before it."""
    if isinstance(exc, CircuitOpenError):
        return True
    if isinstance(exc, UnavailableError) and exc.may_have_arrived:
        return False
    return isinstance(exc.__cause__, httpx.ConnectError)


@functools.lru_cache(maxsize=1024)
def endpoint_of(url: str) -> str:
    """The breaker key of a URL: scheme, host and port."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def ordered(address: str, preferred: MutableMapping[str, str]) -> list[str]:
    """The address's replicas, the one that answered last first."""
    urls = replicas(address)
    last = preferred.get(address)
    if last in urls:
        at = urls.index(last)
        urls = urls[at:] + urls[:at]
    return urls


async def failover(
    address: str,
    preferred: MutableMapping[str, str],
    attempt: Callable[[str], Awaitable[T]],
    *,
    idempotent: bool,
) -> T:
    """`attempt(url)` on each replica in turn, while a failure allows trying the next."""
    urls = ordered(address, preferred)
    reached = False  # a replica tried before may have had the request
    for i, url in enumerate(urls):
        try:
            result = await attempt(url)
        except (UnavailableError, CircuitOpenError) as exc:
            last = i == len(urls) - 1
            reached = reached or not never_arrived(exc)
            if last or not (idempotent or never_arrived(exc)):
                if reached and isinstance(exc, UnavailableError):
                    exc.may_have_arrived = True
                raise
            continue
        if len(urls) > 1:
            preferred[address] = url
        return result
    raise AssertionError("unreachable: the last replica's error is raised")
