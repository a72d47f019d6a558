"""Agent URLs checked where they are given, so a typo is a clear error at start-up.

An agent URL is `http://host[:port][/path]` or `https://…`; several replicas of one agent are
written comma-separated. `check_agent_url` refuses anything else with a message that names the
setting and says what to write (`route billing: '127.0.0.1:8602' is not an http:// or https://
URL; write http://127.0.0.1:8602`): without it, a route without its scheme was accepted and
every handoff to it waited in the outbox, retried forever.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from a2a_handoff.errors import AgentUrlError

EXAMPLE = "http://HOST:PORT/"


def _problem(url: str) -> str | None:
    """Why `url` cannot be called, with what to write instead; None when it can."""
    if not url:
        return f"is empty; write {EXAMPLE}"
    if any(ch.isspace() for ch in url):
        return "holds a space; write one URL, or several joined by commas without spaces"
    if "://" not in url:
        return f"is not an http:// or https:// URL; write http://{url.lstrip('/')}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return f"has a port that is not a number from 1 to 65535; write {EXAMPLE}"
    if parts.scheme.lower() not in ("http", "https"):
        rest = url.split("://", 1)[1]
        return f"is not an http:// or https:// URL; write http://{rest}"
    if not parts.hostname:
        return f"names no host; write {EXAMPLE}"
    if port == 0:
        return f"has port 0; write {EXAMPLE}"
    if parts.query or parts.fragment:
        return "has a query or fragment (?… or #…); an agent URL has neither"
    return None


def check_agent_url(url: str, what: str, *, replicas: bool = True) -> str:
    """`url` stripped, or `AgentUrlError` saying what is wrong with it and what to write.

    `what` names the setting in the message (`route billing`, `--route billing`); `replicas`
    allows several URLs, comma-separated."""
    named = f"{what}: " if what else ""
    if not isinstance(url, str):
        raise AgentUrlError(f"{named}{url!r} is not a URL; write {EXAMPLE}")
    text = url.strip()
    ones = [u.strip() for u in text.split(",")] if replicas else [text]
    for one in ones:
        problem = _problem(one)
        if problem is not None:
            shown = one if len(ones) > 1 else text
            raise AgentUrlError(f"{named}{shown!r} {problem}")
    return ",".join(ones)
