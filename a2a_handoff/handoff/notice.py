"""A notice: a signed envelope that does not end the task (a non-blocking escalation,
`ctx.escalation.inform`), delivered before the handler goes on."""

from __future__ import annotations

import asyncio
from typing import cast

from pydantic import ValidationError

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import CircuitOpenError, HandoffError, RemoteError, UnavailableError
from a2a_handoff.handoff.classify import Done, Outcome, Retry, Rules, Tries, classify
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.wire import create_params
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task
from a2a_handoff.trust.agent_trust import AgentTrust


class Notices:
    """Delivers this agent's notices."""

    def __init__(self, client: AgentClient, trust: AgentTrust, pace: float) -> None:
        self.client = client
        self.trust = trust
        self.pace = pace

    async def send(
        self, envelope: HandoffEnvelope, envelope_json: str, attempts_for: float = 30.0
    ) -> Task:
        """Deliver the notice; the task it created.

        Retried with the same key for up to `attempts_for` seconds (the target deduplicates);
        raises HandoffError when the target refuses it or stays unreachable.
        """
        target = envelope.target
        signature = self.trust.sign_envelope(envelope_json.encode())
        params = create_params(envelope, envelope_json, signature)
        deadline = asyncio.get_running_loop().time() + attempts_for
        rules = Rules(target.agent)
        while True:
            try:
                result = await self.client.call_json(
                    target.url, "SendMessage", params, extensions=[URI], idempotent=True
                )
                answer: Outcome = Task.model_validate(
                    result.get("task") if isinstance(result, dict) else None
                )
            except (RemoteError, UnavailableError, CircuitOpenError, ValidationError) as exc:
                answer = exc
            verdict = classify(answer, Tries(), rules)
            if isinstance(verdict, Done):
                return cast(Task, verdict.created)  # the answer, read whole
            if not isinstance(verdict, Retry):
                raise HandoffError(verdict.reason)
            if asyncio.get_running_loop().time() >= deadline:
                raise HandoffError(f"{target.agent} unreachable: {verdict.error}")
            await asyncio.sleep(self.pace)
