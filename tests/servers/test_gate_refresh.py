"""The capability gate reads a cached card again before refusing (issue 17): a target
restarted with new capabilities is seen at once, not after the card cache's 300 s."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.integration.handoff_support import REFUND, ext, make_agents, message, result, wait_for
from tests.support import AgentProcess


def test_a_target_restarted_with_the_capability_is_seen_at_once(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    target = agents.logistics  # offers shipping, not refunds
    agents.triage.extra = (f"--route=billing={target.url}", "--recovery-interval=0.3")
    target.start()
    agents.triage.start()
    billing: AgentProcess | None = None
    try:
        refused = result(agents.triage.rpc("SendMessage", message(REFUND, str(uuid.uuid4()))))
        reason = refused["task"]["status"]["message"]["parts"][0]["text"]
        assert "not offered by logistics: refunds" in reason  # triage now caches that card
        # The operator fixes the target: billing, with refunds, at the same URL.
        target.stop()
        billing = AgentProcess(
            "billing", agents.billing.store, port=target.port, extra=agents.billing.extra
        )
        billing.log_path = tmp_path / "billing-at-the-same-url.log"
        billing.start()
        context = str(uuid.uuid4())
        sent = result(agents.triage.rpc("SendMessage", message(REFUND, context)))["task"]
        assert sent["status"]["state"] != "TASK_STATE_FAILED", sent["status"]
        moved = wait_for(
            lambda: (
                ext(result(agents.triage.rpc("GetTask", {"id": sent["id"]}))).get("state")
                == "TRANSFERRED"
            )
        )
        assert moved
    finally:
        if billing is not None:
            billing.stop()
        agents.stop()
