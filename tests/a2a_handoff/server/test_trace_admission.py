"""Whose trace context is followed: trusted agents and operators always, an unproven caller
never, anyone else within a bucket of `per_second` refilled each second (a clock of the
test's own: no waiting)."""

from __future__ import annotations

from starlette.datastructures import Headers

from a2a_handoff import ApiKeyAuth
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._trace_admission import TraceAdmission

KEYS = {"alice": "k-alice", "triage": "k-triage"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def key(value: str) -> Headers:
    return Headers({"x-api-key": value})


def test_a_user_is_followed_within_the_rate_a_trusted_agent_always() -> None:
    clock = Clock()
    admission = TraceAdmission(
        Authentication(ApiKeyAuth.from_keys(KEYS), None),
        frozenset({"triage"}),
        per_second=5,
        clock=clock,
    )
    assert [admission.admits(key("k-alice")) for _ in range(8)] == [True] * 5 + [False] * 3
    assert all(admission.admits(key("k-triage")) for _ in range(50))
    assert not admission.admits(key("wrong"))
    assert not admission.admits(Headers({}))
    clock.now += 0.4  # two tokens back
    assert [admission.admits(key("k-alice")) for _ in range(3)] == [True, True, False]
    clock.now += 60  # never more than the bucket holds
    assert sum(admission.admits(key("k-alice")) for _ in range(20)) == 5


def test_without_api_keys_every_caller_shares_the_rate() -> None:
    clock = Clock()
    admission = TraceAdmission(None, frozenset(), per_second=3, clock=clock)
    assert [admission.admits(Headers({})) for _ in range(4)] == [True, True, True, False]
