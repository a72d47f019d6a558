"""The retry policy's pace, read without tenacity: by a delivery that paces itself."""

from __future__ import annotations

from a2a_handoff.client.retry import RetryPolicy


def test_the_policy_backs_off_exponentially_to_its_cap_and_is_exhausted_by_either_limit() -> None:
    policy = RetryPolicy(attempts=4, total_seconds=10.0, initial_wait=0.5, max_wait=3.0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5, 100)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert not policy.exhausted(3, 9.9)
    assert policy.exhausted(4, 0.0)
    assert policy.exhausted(1, 10.0)
    assert RetryPolicy(wait=False).backoff(3) == 0.0
