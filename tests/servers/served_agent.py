"""Agent objects for `python -m a2a_handoff serve tests.servers.served_agent:OBJECT`.

- `agent`: a handler instance without a card: "hand over: TEXT" hands the task to route
  `echo` with TEXT in the transfer context; anything else is greeted.
- `Greeter`: the same handler as a class (served made with no arguments).
- `carded`: a handler that builds its own card (`build_card(url)`).
- `not_an_agent`: a function, not an agent; `Needy`: a class that needs an argument.
"""

from __future__ import annotations

from a2a_handoff import AgentCard, Handoff, Outcome, TaskContext, build_card, skill


class Greeter:
    """Greets whoever writes; hands a task to echo when asked to."""

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        text = ctx.text.strip()
        if text.startswith("hand over:"):
            said = text.removeprefix("hand over:").strip()
            return Handoff("echo", "asked to hand over", context={"said": said})
        await ctx.artifact(text=f"hello, {text}", name="greeting")
        return None


agent = Greeter()


class Carded(Greeter):
    def build_card(self, url: str) -> AgentCard:
        return build_card(
            "carded",
            url,
            description="a card of its own",
            skills=[skill("greet", "Greets", "greeting")],
        )


carded = Carded()


def not_an_agent() -> None:
    """Not an agent: serving it is a usage error."""


class Needy(Greeter):
    """A handler class that needs an argument: served, it is a usage error."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting
