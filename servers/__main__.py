"""`python -m servers NAME --port P --store URL`: run one example agent."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

import uvicorn

from a2a_handoff import Agent, AgentCard, ApiKeyAuth, HandoffError, create_app, open_store
from servers.echo import EchoAgent, echo_card

AGENTS: dict[str, tuple[Callable[[], Agent], Callable[[str], AgentCard]]] = {
    "echo": (EchoAgent, echo_card),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m servers", description=__doc__)
    parser.add_argument("agent", choices=sorted(AGENTS), help="which example agent to run")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--store",
        default=None,
        help="sqlite:///PATH (default: sqlite:///data/NAME.db) or memory://",
    )
    parser.add_argument("--url", default=None, help="the URL the card advertises")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth-keys", metavar="FILE", help="require API keys: principal=key lines")
    auth.add_argument("--auth-env", action="store_true", help="require API keys from $A2A_API_KEYS")
    parser.add_argument("--log-level", default="warning")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    make_agent, make_card = AGENTS[args.agent]
    url = args.url or f"http://{args.host}:{args.port}/"
    try:
        auth = None
        if args.auth_keys:
            auth = ApiKeyAuth.from_file(args.auth_keys)
        elif args.auth_env:
            auth = ApiKeyAuth.from_env()
        store = open_store(args.store or f"sqlite:///data/{args.agent}.db")
    except (HandoffError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app = create_app(make_agent(), make_card(url), store, auth=auth)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
