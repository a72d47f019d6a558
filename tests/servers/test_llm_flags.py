"""`python -m servers triage|billing --llm`: a model when an endpoint is given, keyword
routing otherwise."""

from __future__ import annotations

import argparse

import pytest

from a2a_handoff.llm import LLMAgent
from servers._llm import add_arguments
from servers.billing import BillingAgent, make_billing
from servers.triage import TriageAgent, make_triage


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_llm_without_an_endpoint_routes_by_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert isinstance(make_triage(_args("--llm")), TriageAgent)
    assert isinstance(make_billing(_args()), BillingAgent)


def test_llm_with_an_endpoint_is_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    triage = make_triage(_args("--llm", "--llm-url=http://127.0.0.1:11434/v1"))
    assert isinstance(triage, LLMAgent)
    assert triage._model.base_url == "http://127.0.0.1:11434/v1"
    assert triage._model.name == "llama3.2"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    billing = make_billing(_args("--llm", "--llm-model=qwen2.5"))
    assert isinstance(billing, LLMAgent)
    assert billing._model.name == "qwen2.5"
    assert set(billing._tools) == {"lookup_order", "issue_refund"}
