"""A Redis store refuses to lose acknowledged work silently.

At open, the store reads the server's persistence settings. An acknowledged task or handoff
survives a Redis restart only with `appendonly yes` and `appendfsync always` (every write in
the append-only file, fsync'd before Redis answers), and survives memory pressure only with
`maxmemory-policy noeviction` (Redis refuses writes instead of dropping keys). Otherwise the
store does not open, and says which settings to change — unless its URL says that loss is
acceptable (`?durability=none`: a cache, a demo), which is then said once, as a WARNING.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a_handoff.errors import StoreError

log = logging.getLogger("a2a_handoff.stores")

REQUIRED = {"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"}
_warned: set[str] = set()  # stores (URL, prefix) whose accepted loss was said already


async def check_durability(client: Any, where: str, *, accept_loss: bool) -> None:
    """StoreError when the Redis behind `client` may lose acknowledged writes, unless
    `accept_loss` (then one WARNING per `where`)."""
    found: dict[str, str] = {}
    try:
        for name in REQUIRED:
            reply = await client.config_get(name)
            found[name] = str(reply.get(name, "?"))
    except Exception as exc:  # CONFIG disabled (a managed Redis): nothing proves durability
        problems = [f"its settings cannot be read (CONFIG GET: {exc})"]
    else:
        problems = [
            f"{name} is {found[name]!r}"
            for name, wanted in REQUIRED.items()
            if found[name] != wanted
        ]
    if not problems:
        return
    settings = " ".join(f"{name} {value}" for name, value in REQUIRED.items())
    if accept_loss:
        if where not in _warned:
            _warned.add(where)
            log.warning(
                "Redis at %s may lose acknowledged tasks and handoffs (%s): accepted by"
                " durability=none in the store URL",
                where,
                "; ".join(problems),
            )
        return
    raise StoreError(
        f"Redis at {where} may lose acknowledged tasks and handoffs: {'; '.join(problems)}."
        f" Run it with {settings} (redis-server --appendonly yes --appendfsync always"
        " --maxmemory-policy noeviction, or CONFIG SET … then CONFIG REWRITE), or add"
        " durability=none to the store URL to accept the loss"
    )
