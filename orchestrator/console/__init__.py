"""The console: a web page showing agents at work, live (`python -m orchestrator console`).

A separate little server rather than a route on each agent: a conversation's chain crosses
agents, so one page has to ask them all (with the operator's keys, to the origins named on
its command line only), and an agent serving the page would need every other agent's keys.
It polls each agent (ListTasks, /health, its escalations waiting) and pushes a snapshot to
the page over SSE whenever something changed; the page draws each conversation as a chain
of boxes (tasks) and arrows (transfers, escalations, returns). Answering an escalation from
the page is the CLI's `approve` / `deny` / `reply` (`orchestrator.operator.answer`): the
human agent checks the operator's role under API-key auth, as it does for the CLI.
Plain HTML, CSS and JS shipped in `static/`: no build step, nothing fetched from elsewhere.
"""

from orchestrator.console.app import Console, console_app, serve

__all__ = ["Console", "console_app", "serve"]
