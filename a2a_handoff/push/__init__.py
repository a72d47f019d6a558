"""Push notifications: a task's events POSTed to the webhooks its callers configured.

`push_config` (settings, a caller's config parsed at the edge), `policy` (which URLs may be
called: the SSRF guard), `pusher` (the deliveries: at least once, in order, from the task's
event log, retried), `_webhook` (one delivery's signed request), `_history` (what a config's
deliveries did), `_collector` (their metrics).
"""

from a2a_handoff.push._history import history_of
from a2a_handoff.push._webhook import DELIVERY_HEADER, PUSH_TYP, SIGNATURE_HEADER, TOKEN_HEADER
from a2a_handoff.push.policy import PushPolicy, PushRefused
from a2a_handoff.push.push_config import PushConfig, PushSettings, parse_config
from a2a_handoff.push.pusher import Pusher, PushingStore

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
