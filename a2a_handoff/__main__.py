"""`python -m a2a_handoff lint …` and `python -m a2a_handoff keys …`.

lint DIR [--agents FILE] [--permissions FILE] [--json]
    lint a directory of handoff contracts: exit 0 when no contract has an error, 1 otherwise,
    64 on a usage error; each contract's level (none, L1, L2, L3) and what the next needs
keys list|rotate|retire [KID] (--store URL [--agent NAME] | --key-file PATH) [--json]
    an agent's signing keys, where its store keeps them (a key file beside a SQLite database,
    a Redis key per agent name): `rotate` adds a key that signs from now on (the others still
    verify), `retire KID` withdraws one (its private half dropped; envelopes signed with it
    stop verifying once receivers read the JWKS again). A running agent picks changes up
    within seconds. Exit 1 when refused, 64 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2a_handoff.contracts import lint, render
from a2a_handoff.errors import HandoffError
from a2a_handoff.exits import Parser, quiet_pipe
from a2a_handoff.stores import open_store
from a2a_handoff.trust.keys import Identity, IdentityStore, KeyFile, change
from a2a_handoff.version import __version__


def _lint(args: argparse.Namespace) -> int:
    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 64
    for registry in (args.agents, args.permissions):
        if registry is not None and not registry.is_file():
            print(f"error: {registry} does not exist", file=sys.stderr)
            return 64
    reports = lint(args.directory, args.agents, args.permissions)
    errors = sum(len(r.errors) for r in reports)
    if args.json:
        summary = {
            "contracts": [r.to_json() for r in reports],
            "errors": errors,
            "warnings": sum(len(r.warnings) for r in reports),
        }
        print(json.dumps(summary, indent=2))
    else:
        print(render(reports))
    return 1 if errors else 0


def _rows(identity: Identity) -> list[dict[str, Any]]:
    signing = identity.signing_key.kid
    return [
        {
            "kid": e.kid,
            "status": "retired" if e.retired else ("signing" if e.kid == signing else "active"),
            "created": e.created,
            "retired": e.retired,
        }
        for e in identity.entries
    ]


async def _keys(args: argparse.Namespace) -> int:
    closer = None
    if args.key_file:
        store: IdentityStore = KeyFile(args.key_file)
    else:
        opened = open_store(args.store)
        if getattr(opened, "shared", False):  # Redis: the identity is a key in the store
            await opened.open()
            closer = opened
        store = opened
    try:
        agent = args.agent or ""
        document = await store.load_identity(agent)
        if document is None:
            print(f"error: no identity for {agent or 'this agent'} yet (made on first start)",
                  file=sys.stderr)  # fmt: skip
            return 1
        agent = agent or Identity.from_document(document).agent
        if args.action == "rotate":
            identity = await change(store, agent, Identity.rotated)
        elif args.action == "retire":
            args.kid = args.kid or args.kid_option
            if not args.kid:
                print("error: keys retire needs the KID to retire", file=sys.stderr)
                return 64
            identity = await change(store, agent, lambda i: i.retired(args.kid))
        else:
            identity = Identity.from_document(document, agent)
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if closer is not None:
            await closer.aclose()
    rows = _rows(identity)
    if args.json:
        print(json.dumps({"agent": identity.agent, "keys": rows}, indent=2))
    else:
        for row in rows:
            since = f"retired {row['retired']}" if row["retired"] else f"since {row['created']}"
            print(f"{row['kid']}  {row['status']:8} {since}")
    return 0


def _kid_as_value(argv: Sequence[str]) -> list[str]:
    """`keys retire KID`: a kid is base64url and may start with "-", which argparse would take
    for an option; pass it as `--kid=KID`."""
    args = list(argv)
    if args[:2] == ["keys", "retire"] and len(args) > 2:
        kid = args[2]
        if kid.startswith("-") and not kid.startswith("--") and kid != "-h":
            args[2] = f"--kid={kid}"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="python -m a2a_handoff", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("lint", help="lint a directory of handoff contracts")
    command.add_argument("directory", type=Path)
    command.add_argument("--agents", type=Path, help="the agent registry (default DIR/agents.yaml)")
    command.add_argument(
        "--permissions", type=Path, help="the permission registry (default DIR/permissions.yaml)"
    )
    command.add_argument("--json", action="store_true", help="one JSON document")
    keys = commands.add_parser("keys", help="list, rotate or retire an agent's signing keys")
    keys.add_argument("action", choices=["list", "rotate", "retire"])
    keys.add_argument("kid", nargs="?", help="the key to retire")
    keys.add_argument("--kid", dest="kid_option", help=argparse.SUPPRESS)
    where = keys.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="the agent's store URL (sqlite:///…, redis://…)")
    where.add_argument("--key-file", type=Path, help="the agent's key file (--key-file)")
    keys.add_argument("--agent", help="the agent's name (needed for a Redis store)")
    keys.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(_kid_as_value(sys.argv[1:] if argv is None else argv))
    if args.command == "lint":
        return _lint(args)
    try:
        return asyncio.run(_keys(args))
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 64


if __name__ == "__main__":
    sys.exit(quiet_pipe(main))
