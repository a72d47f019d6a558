"""`python -m a2a_handoff lint DIR [--agents FILE] [--permissions FILE] [--json]`.

Lints a directory of handoff contracts: exit 0 when no contract has an error, 1 otherwise,
64 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from a2a_handoff.contracts import lint, render


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2a_handoff", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("lint", help="lint a directory of handoff contracts")
    command.add_argument("directory", type=Path)
    command.add_argument("--agents", type=Path, help="the agent registry (default DIR/agents.yaml)")
    command.add_argument(
        "--permissions", type=Path, help="the permission registry (default DIR/permissions.yaml)"
    )
    command.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
