"""Push notifications: a task's events POSTed to the webhooks its callers configured.

`push_config` (settings, a caller's config parsed at the edge), `policy` (which URLs may be
called: the SSRF guard), `pusher` (the deliveries: at least once, in order, from the task's
event log, retried), `_caps` (how many configs a task and a caller may have), `_webhook`
(one delivery's request, signed for its receiver, within a deadline), `_receivers` (each
receiver's share of the connections), `_history` (what a config's deliveries did),
`_collector` (their metrics).
"""

from a2a_handoff.push._history import history_of
from a2a_handoff.push._webhook import (
    DELIVERY_HEADER,
    DELIVERY_SIGNATURE_HEADER,
    DELIVERY_TYP,
    PUSH_TYP,
    SIGNATURE_HEADER,
    TOKEN_HEADER,
    delivery_claims,
)
from a2a_handoff.push.policy import PushPolicy, PushRefused
from a2a_handoff.push.push_config import PushConfig, PushSettings, parse_config
from a2a_handoff.push.pusher import Pusher, PushingStore

__all__ = [
    "DELIVERY_HEADER",
    "DELIVERY_SIGNATURE_HEADER",
    "DELIVERY_TYP",
    "PUSH_TYP",
    "SIGNATURE_HEADER",
    "TOKEN_HEADER",
    "PushConfig",
    "PushPolicy",
    "PushRefused",
    "PushSettings",
    "Pusher",
    "PushingStore",
    "delivery_claims",
    "history_of",
    "parse_config",
]
