"""`python -m a2a_handoff serve|lint|keys|trust|db …` (installed: `a2a-handoff …`).

serve MODULE:OBJECT --port P [--store URL] [--route NAME=URL …] [--trust NAME=URL …] […]
    serve an agent object (a handler, an LLMAgent, an Agents SDK agent, a LangGraph graph)
    with the example agents' flags: `serve --help` says which object and which card

lint DIR [--agents FILE] [--permissions FILE] [--json]
    lint a directory of handoff contracts: exit 0 when no contract has an error, 1 otherwise,
    64 on a usage error; each contract's level (none, L1, L2, L3) and what the next needs
keys list|rotate|retire [KID] (--store sqlite:///… | --key-file PATH) [--json]
    an agent's signing keys, in its key file (beside a SQLite database, or named by
    --key-file): `rotate` adds a key that signs from now on (the others still verify),
    `retire KID` withdraws one (its private half dropped; envelopes signed with it stop
    verifying once receivers read the JWKS again). A running agent picks changes up within
    seconds. Exit 1 when refused, 64 on a usage error.
keys init --agent NAME (--store sqlite:///… | --key-file PATH)
    a new identity, on purpose (an agent never makes itself one when its key file is missing
    but its store was used before)
keys move --store redis://… --agent NAME --key-file PATH
    keys an older version kept in Redis, moved into a key file (0600) and out of Redis
db status|upgrade --store URL [--agent NAME] [--json]
    the store's schema version (SQLite, PostgreSQL; Redis: its key layout's) and the
    migrations this version of a2a-handoff has for it: `status` lists those pending (exit 1
    when an agent would refuse the store: behind, or ahead and not compatible), `upgrade`
    runs them (a second run finds nothing to do). --agent NAME: the agent's default schema
    or key prefix, when the URL names none
trust list|forget [NAME] (--store sqlite:///… | --key-file PATH) [--json]
    the keys the agent pinned for each agent it trusts (beside its key file); `forget NAME`
    drops one pin, on purpose, when NAME's identity changed: the next keys NAME serves are
    pinned. A running agent sees it at its next fetch of NAME's keys
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
from a2a_handoff.errors import HandoffError, TrustError
from a2a_handoff.exits import ExitCode, Parser, quiet_pipe
from a2a_handoff.stores import open_store
from a2a_handoff.trust.keys import Identity, IdentityStore, KeyFile, change
from a2a_handoff.trust.pins import PinFile
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


def _key_file(args: argparse.Namespace, create: bool = False) -> KeyFile:
    """The key file the command names: --key-file, or the one beside a SQLite store."""
    if args.key_file:
        return KeyFile(args.key_file, create=create)
    if not args.store:
        raise TrustError("name the keys: --key-file PATH, or --store sqlite:///… (beside it)")
    kept = open_store(args.store).capabilities.identity
    if not isinstance(kept, KeyFile):
        raise TrustError("a Redis or memory store keeps no key file: name it with --key-file PATH")
    return KeyFile(kept.path, create=create)


async def _init(args: argparse.Namespace) -> Identity:
    """`keys init`: a new identity, on purpose, where none is."""
    if not args.agent:
        raise TrustError("keys init needs --agent NAME (the agent the keys are for)")
    store = _key_file(args, create=True)
    if store.read() is not None:
        raise TrustError(f"{store.path} holds an identity already: rotate or retire its keys")
    identity = Identity.generate(args.agent)
    store.write_if(identity.to_document(), None)
    return identity


async def _move(args: argparse.Namespace) -> Identity:
    """`keys move`: an identity an older version kept in Redis, into a key file (0600), and
    out of Redis."""
    if not (args.store and args.key_file and args.agent):
        raise TrustError("keys move needs --store redis://… --agent NAME --key-file PATH")
    opened = open_store(args.store)
    legacy = opened.capabilities.legacy_keys
    if legacy is None:
        raise TrustError("keys move takes keys out of a Redis store: --store redis://…")
    await opened.open()
    try:
        document = await legacy.legacy_identity(args.agent)
        if document is None:
            raise TrustError(f"Redis keeps no identity of {args.agent}")
        identity = Identity.from_document(document, args.agent)
        target = KeyFile(args.key_file, create=True)
        if not target.write_if(document, None):
            raise TrustError(f"{args.key_file} exists already: give another path")
        await legacy.drop_legacy_identity(args.agent, document)
    finally:
        await opened.aclose()
    return identity


async def _keys(args: argparse.Namespace) -> int:
    try:
        if args.action == "init":
            identity = await _init(args)
        elif args.action == "move":
            identity = await _move(args)
        else:
            store: IdentityStore = _key_file(args)
            agent = args.agent or ""
            document = await store.load_identity(agent)
            if document is None:
                path = _key_file(args).path
                print(
                    f"error: no identity at {path} (python -m a2a_handoff keys init"
                    f" --key-file {path} --agent {agent or 'NAME'} makes one)",
                    file=sys.stderr,
                )
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
    rows = _rows(identity)
    if args.json:
        print(json.dumps({"agent": identity.agent, "keys": rows}, indent=2))
    else:
        for row in rows:
            since = f"retired {row['retired']}" if row["retired"] else f"since {row['created']}"
            print(f"{row['kid']}  {row['status']:8} {since}")
    return 0


def _trust(args: argparse.Namespace) -> int:
    """`trust list` / `trust forget NAME`: the keys this agent pinned for the agents it
    trusts. Forgetting a pin is an operator's act: the agent pins what NAME serves next."""
    try:
        pins = PinFile.beside(_key_file(args).path)
        if args.action == "forget":
            if not args.name:
                print("error: trust forget needs the NAME of the trusted agent", file=sys.stderr)
                return 64
            if not pins.forget(args.name):
                print(f"error: no keys are pinned for {args.name}", file=sys.stderr)
                return 1
            print(f"forgot {args.name}'s pinned keys: the next keys it serves are pinned")
            return 0
        pinned = pins.names()
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(pinned, indent=2))
    else:
        for name, kids in sorted(pinned.items()):
            print(f"{name}  {', '.join(kids)}")
    return 0


async def _db(args: argparse.Namespace) -> int:
    """`db status` / `db upgrade`: the store's schema version, and its migrations run."""
    try:
        store = open_store(args.store)
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    schema = store.capabilities.schema
    if schema is None:
        print(f"error: {args.store} keeps no versioned schema", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.agent:
        store.claim(args.agent)
    try:
        before = await schema.schema_status()
        after = await schema.upgrade() if args.action == "upgrade" else before
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.FAILED)
    if args.json:
        report = after.to_json()
        if args.action == "upgrade":
            report["applied"] = [m.version for m in before.pending if m not in after.pending]
        print(json.dumps(report, indent=2))
    elif args.action == "status" or not before.pending or before.ahead:
        print(after.render())
    else:
        print(f"{after.where}: upgraded from version {before.current} to {after.current}")
        for migration in before.pending:
            print(f"  applied {migration.version}  {migration.name} ({migration.kind})")
    return int(ExitCode.COMPLETED if after.usable else ExitCode.FAILED)


def _kid_as_value(argv: Sequence[str]) -> list[str]:
    """`keys retire KID`: a kid is base64url and may start with "-", which argparse would take
    for an option; pass it as `--kid=KID`."""
    args = list(argv)
    if args[:2] == ["keys", "retire"] and len(args) > 2:
        kid = args[2]
        if kid.startswith("-") and not kid.startswith("--") and kid != "-h":
            args[2] = f"--kid={kid}"
    return args


def prog_name(module: str) -> str:
    """The command as it was run: the console script's name (`a2a-handoff`), or
    `python -m MODULE` when run as a module."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return f"python -m {module}" if name in ("", "__main__.py", "-c") else name


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = prog_name("a2a_handoff")
    if argv[:1] == ["serve"]:  # its flags are the example agents' (servers/_flags.py)
        from servers.any_agent import main as serve

        return serve(argv[1:], f"{prog} serve")
    parser = Parser(prog=prog, description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="serve an agent object: serve MODULE:OBJECT --port P …")
    command = commands.add_parser("lint", help="lint a directory of handoff contracts")
    command.add_argument("directory", type=Path)
    command.add_argument("--agents", type=Path, help="the agent registry (default DIR/agents.yaml)")
    command.add_argument(
        "--permissions", type=Path, help="the permission registry (default DIR/permissions.yaml)"
    )
    command.add_argument("--json", action="store_true", help="one JSON document")
    keys = commands.add_parser("keys", help="list, rotate or retire an agent's signing keys")
    keys.add_argument("action", choices=["list", "rotate", "retire", "init", "move"])
    keys.add_argument("kid", nargs="?", help="the key to retire")
    keys.add_argument("--kid", dest="kid_option", help=argparse.SUPPRESS)
    keys.add_argument(
        "--store",
        help="the agent's store URL (sqlite:///…: the key file beside"
        " it; redis://…: for keys move)",
    )
    keys.add_argument("--key-file", type=Path, help="the agent's key file (--key-file)")
    keys.add_argument("--agent", help="the agent's name (needed for a Redis store)")
    trust = commands.add_parser("trust", help="the keys an agent pinned for the agents it trusts")
    trust.add_argument("action", choices=["list", "forget"])
    trust.add_argument("name", nargs="?", help="the trusted agent whose pin to forget")
    trust.add_argument("--store", help="the agent's store URL (sqlite:///…: beside it)")
    trust.add_argument("--key-file", type=Path, help="the agent's key file (pins beside it)")
    trust.add_argument("--json", action="store_true", help="one JSON document")
    keys.add_argument("--json", action="store_true", help="one JSON document")
    db = commands.add_parser("db", help="the store's schema version, and its migrations run")
    db.add_argument("action", choices=["status", "upgrade"])
    db.add_argument("--store", required=True, help="the agent's store URL")
    db.add_argument("--agent", help="the agent's name: its default schema or key prefix")
    db.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(_kid_as_value(argv))
    if args.command == "db":
        return asyncio.run(_db(args))
    if args.command == "lint":
        return _lint(args)
    if args.command == "trust":
        return _trust(args)
    try:
        return asyncio.run(_keys(args))
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 64


if __name__ == "__main__":
    sys.exit(quiet_pipe(main))
