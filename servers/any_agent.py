"""`python -m a2a_handoff serve MODULE:OBJECT --port P [the example agents' flags]`: any agent
object served as the example agents are, with the same flags.

OBJECT, an attribute of the importable MODULE, is one of:
- a handler: an instance with an async `handle(ctx)` (an `LLMAgent` is one), or a class
  with one, made with no arguments;
- an OpenAI Agents SDK `Agent`, served through `from_agents_sdk`;
- a LangGraph graph: a `StateGraph` (its checkpoints in SQLite beside a sqlite:/// store) or
  a compiled graph with its own checkpointer, served through `from_langgraph`.

Its card: the object's own when it offers one — a `card` attribute (an `AgentCard`, served
as it is, or a function of the URL) or a `build_card(url)` method; otherwise one built from
`--name` (default: the object's `name`, else OBJECT), `--description` (default: the
object's `description`, else its docstring's first line) and the object's `skills` (a list
of `AgentSkill`, default one skill named for the agent).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from a2a_handoff import Agent, AgentCard, HandoffError, build_card, skill
from a2a_handoff.exits import ExitCode, Parser
from a2a_handoff.observe import logs
from a2a_handoff.protocol import AgentSkill
from a2a_handoff.version import __version__
from servers._flags import agent_options
from servers._run import Example, serve

USAGE = "MODULE:OBJECT names an agent object, e.g. my_agents:support (support in my_agents.py)"


def load(spec: str) -> tuple[str, Any]:
    """The object `MODULE:OBJECT` names, and OBJECT (HandoffError: no such object, said in
    one line)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HandoffError(f"{spec!r}: {USAGE}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandoffError(f"cannot import {module_name}: {exc}") from None
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise HandoffError(f"{module_name} has no {attribute!r}; {USAGE}")
        found = getattr(found, part)
    return attribute, found


def _instance_of(obj: Any, module: str, *names: str) -> bool:
    """Whether `obj` is one of the classes `names` of `module` — looked up only if that
    module is loaded already (the object's own module imported its framework)."""
    loaded = sys.modules.get(module)
    classes = tuple(c for c in (getattr(loaded, n, None) for n in names) if isinstance(c, type))
    return bool(classes) and isinstance(obj, classes)


def _kind(obj: Any) -> str:
    """'agents-sdk', 'langgraph', 'handler' or '' (not an agent)."""
    if _instance_of(obj, "agents", "Agent"):
        return "agents-sdk"
    if _instance_of(obj, "langgraph.graph.state", "StateGraph", "CompiledStateGraph"):
        return "langgraph"
    handle = getattr(obj, "handle", None)
    if handle is not None and inspect.iscoroutinefunction(handle):
        return "handler"
    return ""


def _agent(obj: Any, what: str) -> Callable[[argparse.Namespace], Agent]:
    """How to make the handler `obj` stands for (HandoffError: it is no agent)."""
    kind = _kind(obj)
    if kind == "handler" and isinstance(obj, type):
        return lambda _: _made(obj, what)
    if kind == "handler":
        return lambda _: cast(Agent, obj)
    if kind == "agents-sdk":
        from a2a_handoff.adapters import from_agents_sdk

        return lambda _: from_agents_sdk(obj)
    if kind == "langgraph":
        return lambda args: _graph(obj, args)
    raise HandoffError(
        f"{what} is a {type(obj).__name__}, not an agent: give a handler (an object or class"
        " with an async handle(ctx)), an LLMAgent, an Agents SDK Agent or a LangGraph graph"
    )


def _made(cls: type, what: str) -> Agent:
    """A handler class made with no arguments (ValueError, a usage error: it needs some)."""
    try:
        return cast(Agent, cls())
    except TypeError as exc:
        raise ValueError(
            f"{what}: a class is made with no arguments ({exc}); give an instance"
        ) from exc


def _graph(graph: Any, args: argparse.Namespace) -> Agent:
    """A LangGraph graph as a handler: a compiled one keeps its own checkpointer; a builder's
    checkpoints go to a SQLite file beside the agent's sqlite:/// store."""
    from a2a_handoff.adapters import from_langgraph

    if not _instance_of(graph, "langgraph.graph.state", "StateGraph"):
        return from_langgraph(graph)  # compiled: its own checkpointer
    store = args.store or f"sqlite:///data/{args.name}.db"
    if not store.startswith("sqlite:///"):
        raise ValueError(
            "a LangGraph StateGraph keeps its checkpoints beside a sqlite:/// store: give one,"
            " or serve the graph compiled with a checkpointer of its own"
        )
    return from_langgraph(
        graph, checkpoints=store.split("?", 1)[0].removesuffix(".db") + "-graph.db"
    )


def _name(obj: Any, attribute: str) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name and name != "LangGraph":
        return name
    return attribute.rsplit(".", 1)[-1]


def card_maker(obj: Any, name: str, description: str | None) -> Callable[[str], AgentCard]:
    """The object's own card (see the module's docstring), or one built for it."""
    own = getattr(obj, "card", None)
    if isinstance(own, AgentCard):
        return lambda _: own
    if callable(own):
        return lambda url: _checked(own(url))
    built = getattr(obj, "build_card", None)
    if callable(built):
        return lambda url: _checked(built(url))
    if description is None:
        said = getattr(obj, "description", None)
        doc = inspect.getdoc(obj) if _kind(obj) == "handler" else None
        description = said if isinstance(said, str) else (doc or "").split("\n\n")[0]
    skills = getattr(obj, "skills", None)
    if not (isinstance(skills, list) and all(isinstance(s, AgentSkill) for s in skills)):
        skills = [skill(name, description or f"The {name} agent", name)]
    text = " ".join(description.split())
    return lambda url: build_card(name, url, description=text, skills=skills)


def _checked(card: object) -> AgentCard:
    if not isinstance(card, AgentCard):
        raise ValueError(f"the object's card is a {type(card).__name__}, not an AgentCard")
    return card


def main(argv: Sequence[str], prog: str) -> int:
    """`serve MODULE:OBJECT …`: the exit code."""
    parser = Parser(prog=prog, description=__doc__)
    parser.add_argument("object", metavar="MODULE:OBJECT", help="the agent object to serve")
    parser.add_argument("--name", default=None, help="the agent's name (default: see above)")
    parser.add_argument("--description", default=None, help="its card's description")
    agent_options(parser, examples=False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # MODULE from the current directory, as `python -m` finds it
    try:
        attribute, obj = load(args.object)
        args.name = args.name or _name(obj, attribute)
        make_agent = _agent(obj, args.object)
        make_card = card_maker(obj, args.name, args.description)
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    logs.configure(args.log_level, args.log_format)
    return serve(args.name, Example(make_agent, make_card), args)
