"""`python -m servers all`: the options it takes for every agent and passes on to each, the
keys the agents present to each other under API-key auth, and the TLS they all serve.

What `all` passes on is each value as it was written, checked first as the agent checks it:
`--retain 30d` reaches the agents as `30d` (the agents' parser makes seconds of it; `all`'s
only refuses a bad one). The agents share `--host`, and a certificate names hosts, not ports:
one certificate for that host serves them all. Under mutual TLS they would all present that
one certificate, one principal that none of them could tell from the others, so `all` takes
`--tls-client-ca` only with API keys (each agent presents its own principal's).
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from a2a_handoff import HandoffError
from a2a_handoff.auth import ENV_VAR as AUTH_ENV_VAR
from a2a_handoff.auth import parse_keys
from a2a_handoff.secrets import SecretError, check_private
from a2a_handoff.server import TlsConfig
from servers._flags import tls_config

TLS = ("tls_cert", "tls_key", "tls_client_ca", "tls_ca", "tls_client_cert", "tls_client_key")
# The agent options that mean the same for every agent (or for the one agent they concern,
# the others ignoring them): `all` takes them and passes them on. Not the ones that name one
# agent's own things (--port, --store, --url, --route, --scope, --key-file, --credential).
PASSED_ON = (
    "trust",
    "trust_file",
    "operators",
    "trust_max_age",
    "keys_reload",
    "return_give_up",
    "ttl",
    "max_hops",
    "recovery_interval",
    "auth_keys",
    "auth_env",
    "oidc_issuer",
    "oidc_retry",
    "escalate_over",
    "repeated_failures",
    "answer_within",
    "check_every",
    "max_connections",
    "max_streams",
    "header_timeout",
    "body_timeout",
    "write_timeout",
    "keep_alive",
    "llm",
    "llm_url",
    "llm_model",
    "llm_timeout",
    "log_level",
    "log_format",
    "metrics_public",
    "otlp_endpoint",
    "push_allow",
    "no_push",
    "push_give_up",
    "mcp",
    "mcp_timeout",
    "drain_seconds",
    "close_seconds",
    "retain",
    *TLS,
)
KEY_VAR = "A2A_SERVERS_ALL_AGENT_KEY"  # the key an agent presents to the others, in its env


def add_agent_options(
    parser: argparse.ArgumentParser, agent_options: Callable[[argparse.ArgumentParser], None]
) -> list[argparse.Action]:
    """The agent options of `PASSED_ON`, added to `all`'s parser (same names, defaults and
    help as `python -m servers NAME`); the actions, to pass the values on."""
    template = argparse.ArgumentParser(add_help=False)
    agent_options(template)
    group = parser.add_argument_group(
        "passed on to every agent (what they mean: python -m servers NAME --help)"
    )
    actions = [_as_written(a) for a in template._actions if a.dest in PASSED_ON]
    for action in actions:
        group._add_action(action)
    return actions


def _as_written(action: argparse.Action) -> argparse.Action:
    """`action`, its value kept as written once its own type accepts it: what the agents get
    is what was typed (a duration keeps its unit), and a bad value is refused here, at once."""
    convert = action.type
    if not callable(convert):
        return action
    action = copy.copy(action)

    def check(text: str) -> str:
        convert(text)
        return text

    check.__name__ = getattr(convert, "__name__", "value")  # argparse's error names it
    action.type = check
    return action


def passed_on(args: argparse.Namespace, actions: Sequence[argparse.Action]) -> list[str]:
    """The options given to `all`, as arguments for each agent (defaults left out)."""
    out: list[str] = []
    for action in actions:
        value = getattr(args, action.dest)
        if value is None or value == action.default:
            continue
        option = action.option_strings[-1]
        if action.nargs == 0:  # a flag
            out.append(option)
        elif isinstance(value, list):
            out += [f"{option}={v}" for v in value]
        else:
            out.append(f"{option}={value}")
    return out


def agent_keys(args: argparse.Namespace, callers: Sequence[str]) -> dict[str, str]:
    """Under API-key auth, the key each agent that calls others presents: its own
    principal's (named for the agent) from the same keys — the principal its peers trust it
    as. {} without auth; HandoffError (a usage error) when one is missing, or when the human
    agent would have no operators."""
    if args.auth_keys and args.auth_env:
        raise HandoffError("--auth-keys and --auth-env: give one")
    if args.auth_keys:
        path = Path(args.auth_keys)
        try:
            check_private(path, "--auth-keys")
            keys = parse_keys(path.read_text())
        except SecretError as exc:
            raise HandoffError(str(exc)) from None
        except OSError as exc:
            raise HandoffError(f"--auth-keys: cannot read {path}: {exc.strerror}") from None
        where = str(path)
    elif args.auth_env:
        keys = parse_keys(os.environ.get(AUTH_ENV_VAR, ""))
        where = f"${AUTH_ENV_VAR}"
    elif args.oidc_issuer:
        raise HandoffError(
            "--oidc-issuer needs --auth-keys or --auth-env here: the agents call each other"
            " with API keys (the issuer's tokens are for the users' calls)"
        )
    else:
        return {}
    missing = [name for name in callers if name not in keys]
    if missing:
        raise HandoffError(
            f"{where} has no key for {', '.join(missing)}: under API-key auth each agent"
            " presents its own principal's key (named for the agent) to the others; add"
            f" lines {', '.join(f'{name}=KEY' for name in missing)}"
        )
    if not args.operators:
        raise HandoffError(
            "under API-key auth the human agent needs --operators (the principals that decide"
            " escalations)"
        )
    return {name: keys[name] for name in callers}


def served_tls(args: argparse.Namespace) -> TlsConfig | None:
    """The TLS the agents serve and call each other with, as `all`'s flags say (None: none);
    HandoffError (a usage error) for flags no agent would start with, or for mutual TLS
    without API keys."""
    given: dict[str, Any] = {
        name: None if getattr(args, name) is None else Path(getattr(args, name)) for name in TLS
    }
    tls = tls_config(argparse.Namespace(**given))  # ConfigError, a HandoffError
    if tls is not None and tls.mutual and not (args.auth_keys or args.auth_env):
        raise HandoffError(
            "--tls-client-ca needs --auth-keys or --auth-env here: every agent would present"
            " the one --tls-cert, one principal for all of them, so none could tell who calls;"
            " with API keys each presents its own principal's key (or start the agents one by"
            " one, each with a certificate of its own)"
        )
    return tls
