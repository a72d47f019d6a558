"""Triage written with the OpenAI Agents SDK (`python -m servers triage --framework agents-sdk`).

An ordinary SDK agent: instructions, a model, and handoffs — billing and logistics are remote
agents (`remote_agent`), so the adapter turns each handoff into the library's durable one.
Needs the `agents` extra and a model (`--llm-url` or $OPENAI_BASE_URL).
"""

from __future__ import annotations

import argparse

from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel

from a2a_handoff import Agent
from a2a_handoff.adapters import from_agents_sdk, remote_agent
from servers import _llm
from servers.triage import INSTRUCTIONS


def make_triage_sdk(args: argparse.Namespace) -> Agent:
    model = _llm.model(args)
    if model is None:
        raise ValueError("--framework agents-sdk needs a model: --llm-url or $OPENAI_BASE_URL")
    triage = SdkAgent(
        name="triage",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(str(model.name), model.client()),
        handoffs=[
            remote_agent("billing", required=["refunds"]),
            remote_agent("logistics", required=["shipping"]),
        ],
    )
    return from_agents_sdk(triage)
