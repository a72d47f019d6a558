"""The human agent with a card that offers no streaming (run as a process).

python -m tests.orchestrator.quiet_human human --port P --store URL [servers' options]

The example human agent itself (`servers human`), unchanged but for its card's
`capabilities.streaming`: a follower of its escalations has to poll it, as it would an agent
that does not stream.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from a2a_handoff import AgentCard
from servers import __main__ as servers
from servers.human import human_card


def quiet_card(url: str) -> AgentCard:
    card = human_card(url)
    card.capabilities.streaming = False
    return card


def main() -> int:
    servers.EXAMPLES["human"] = replace(servers.EXAMPLES["human"], make_card=quiet_card)
    return servers.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
