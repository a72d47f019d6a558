"""Push notifications: a task's events POSTed to the webhooks its callers configured.

`push_config` (settings, a caller's config parsed at the edge), `policy` (which URLs may be
called: the SSRF guard), `pusher` (the deliveries: at least once, signed, from the task's
event log).
"""

from a2a_handoff.push.policy import PushPolicy, PushRefused
from a2a_handoff.push.push_config import PushConfig, PushSettings, parse_config
from a2a_handoff.push.pusher import (
    DELIVERY_HEADER,
    PUSH_TYP,
    SIGNATURE_HEADER,
    TOKEN_HEADER,
    Pusher,
    PushingStore,
    history_of,
)

__all__ = [
    "DELIVERY_HEADER",
    "PUSH_TYP",
    "SIGNATURE_HEADER",
    "TOKEN_HEADER",
    "PushConfig",
    "PushPolicy",
    "PushRefused",
    "PushSettings",
    "Pusher",
    "PushingStore",
    "history_of",
    "parse_config",
]
