"""How the suite spreads over pytest-xdist's workers (`scripts/test`: `--dist loadgroup
--no-loadscope-reorder`).

A test file runs on one worker, as a unit (its module-scoped agents start once there), except
the tests named in `ALONE`: each of those is a unit of its own, so that the longest tests of
one file run side by side on several workers. Units start in collection order, with the
longest first (`FIRST`): a long unit started last would keep its worker busy after the others
are done.
"""

from __future__ import annotations

import pytest

ALONE = (
    # ~35 s each: kill -9 at random under load, on each store
    "tests/integration/test_handoff_crash.py::test_chaos_kill_9_at_random",
)

FIRST = (  # node id prefixes, the longest units first
    "tests/integration/test_handoff_crash.py::test_chaos_kill_9_at_random",
    "tests/integration/test_handoff_crash.py",
    "tests/a2a_handoff/adapters/test_adapters.py",
    "tests/test_readme.py",
    "tests/integration/test_trust_keys.py",
    "tests/integration/test_postgres.py",
    "tests/integration/test_delegation.py",
    "tests/integration/test_delegation_stores.py",
    "tests/integration/test_push.py",
    "tests/integration/test_escalation.py",
    "tests/orchestrator/test_operator.py",
    "tests/orchestrator/test_conversation.py",
    "tests/orchestrator/test_cli.py",
    "tests/integration/test_replicas.py",
    "tests/test_timeouts.py",
    "tests/integration/test_handoff.py",
    "tests/integration/test_call_tool.py",
)


def _rank(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(FIRST) if item.nodeid.startswith(prefix)), len(FIRST))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: a file's tests stay together, in their order
    for item in items:
        if item.get_closest_marker("xdist_group") is None and not item.nodeid.startswith(ALONE):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
