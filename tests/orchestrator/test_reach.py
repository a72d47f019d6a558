"""The orchestrator's keys per origin, and whom it follows a pointer to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from a2a_handoff import HANDOFF_EXTENSION_URI
from a2a_handoff.errors import UnavailableError
from a2a_handoff.protocol.agent_card import AgentCard, build_card
from orchestrator.reach import Reach, credentials, origin, parse_keys

pytestmark = pytest.mark.anyio


def test_origins_and_key_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert origin("http://127.0.0.1:8101/a/b") == "http://127.0.0.1:8101"
    assert origin("https://example.test/") == "https://example.test:443"
    assert parse_keys("http://a:1=k1\n# note\nhttp://b:2/=k2", "f") == {
        "http://a:1": "k1",
        "http://b:2": "k2",
    }
    with pytest.raises(ValueError, match="ORIGIN=KEY"):
        parse_keys("alice=key", "f")
    keys = tmp_path / "keys"
    keys.write_text("http://b:2=from-file\n")
    monkeypatch.setenv("A2A_API_KEYS", "http://c:3=from-env,http://b:2=overridden")
    found = credentials("http://a:1/,http://a:9/", "entry-key", keys)
    assert found == {
        "http://a:1": "entry-key",
        "http://a:9": "entry-key",
        "http://b:2": "from-file",
        "http://c:3": "from-env",
    }


class Cards:
    """Cards by URL, as the client would fetch them."""

    def __init__(self, peers: dict[str, list[str]]) -> None:
        self.peers = peers
        self.fetched: list[str] = []

    async def card(self, url: str) -> AgentCard:
        self.fetched.append(url)
        if url not in self.peers:
            raise UnavailableError(url)
        card = build_card("x", url)
        body: dict[str, Any] = card.dump()
        body["capabilities"]["extensions"] = [
            {"uri": HANDOFF_EXTENSION_URI, "params": {"peers": self.peers[url]}}
        ]
        return AgentCard.model_validate(body)


async def test_a_pointer_is_followed_only_within_the_trust_lists_reach() -> None:
    cards = Cards(
        {
            "http://triage:1/": ["http://billing:2/"],
            "http://billing:2/": ["http://human:3/"],
            "http://human:3/": ["http://billing:2/"],
        }
    )
    reach = Reach(cards, ["http://triage:1/"])  # type: ignore[arg-type]
    assert await reach.allows("http://triage:1/")
    assert await reach.allows("http://billing:2/")
    assert await reach.allows("http://human:3/")  # through billing's trust list
    assert not await reach.allows("http://127.0.0.1:9999/")
    assert len(cards.fetched) <= 6  # explored once, not once per question
