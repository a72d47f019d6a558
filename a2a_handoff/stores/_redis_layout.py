"""The Redis store's key layout version (`stores.versions`): where a prefix stands, and
`db upgrade` moving it to this code's layout.

`layout` holds the version, `layout:compat` the oldest code version that may use the prefix.
Layout 1 kept no version: a prefix holding tasks or handoffs and no `layout` is at 1. A
prefix that holds nothing is made at this code's layout when a store opens it.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.stores._redis_scripts import ALL as SCRIPTS
from a2a_handoff.stores._redis_scripts import LAYOUT, LAYOUTS
from a2a_handoff.stores.versions import SchemaStatus, check_usable, compatible_from, status_of

_USED = ("i:all", "ob:ids", "ob:pending", "rcv", "p:active")  # a prefix in use has one


async def layout_status(client: Any, prefix: str) -> SchemaStatus:
    """Where the prefix stands."""
    where = f"Redis key prefix {prefix}"
    found, compatible = await client.mget(prefix + "layout", prefix + "layout:compat")
    if found is not None:
        kept = int(compatible) if compatible is not None else None
        return status_of(where, LAYOUTS, int(found), kept)
    used = await client.exists(*(prefix + key for key in _USED))
    return status_of(where, LAYOUTS, 1 if used else 0, None, exists=bool(used))


async def set_layout(client: Any, prefix: str, layout: int) -> None:
    """Record the prefix at `layout`, with the oldest code version that may use it."""
    compatible = compatible_from(LAYOUTS, layout)
    await client.mset({prefix + "layout": str(layout), prefix + "layout:compat": str(compatible)})


async def upgrade_layout(client: Any, prefix: str, url: str) -> SchemaStatus:
    """The prefix moved to this code's layout (`MIGRATE`, one script: atomic); nothing for
    one up to date or that holds nothing; StoreVersionError for one ahead and not
    compatible. The status after."""
    status = await layout_status(client, prefix)
    if status.ahead:
        check_usable(status, url)
        return status
    if not status.pending:
        return status
    keys = [prefix + key for key in ("layout", "ob:pending", "ob:pend", "ob:ids", "rcv")]
    migrate = client.register_script(SCRIPTS["migrate"])
    await migrate(keys=[*keys, prefix + "ob:last_done"], args=[prefix, LAYOUT])
    await set_layout(client, prefix, status.code)
    return await layout_status(client, prefix)
