"""The echo agent: answers with an artifact echoing the text.

- `ask: QUESTION` → INPUT_REQUIRED with the question; the follow-up completes the task.
- `sleep:N` → WORKING for N seconds with one status update a second, then COMPLETED.
- `reply: TEXT` → a direct Message saying TEXT (its task is only a receipt).
- `tokens: WORDS` → the words streamed as one artifact, a chunk each 0.1 s apart, COMPLETED.
- anything else → an artifact echoing the text, COMPLETED.
"""

from __future__ import annotations

import asyncio

from a2a_handoff import (
    AgentCard,
    Completed,
    InputRequired,
    Outcome,
    Reply,
    Role,
    TaskContext,
    build_card,
    skill,
)


class EchoAgent:
    """Echoes; asks when told to; sleeps when told to.

    A task cut by a crash resumes (`resumes`): its handler runs again on the same message —
    `sleep:N` sleeps again, its status updates already sent not sent twice."""

    resumes = True

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        text = ctx.text.strip()
        if sum(m.role is Role.USER for m in ctx.history) > 1:  # the answer to our question
            await ctx.artifact(text=text, name="echo")
            return Completed(f"Thanks, you said: {text}")
        if text.startswith("reply:"):
            return Reply(text[len("reply:") :].strip() or "hello")
        if text.startswith("tokens:"):
            async with ctx.artifact_stream("tokens") as stream:
                for i, word in enumerate(text[len("tokens:") :].split()):
                    await asyncio.sleep(0.1)
                    await stream.write(word if i == 0 else " " + word)
            return None
        if text.startswith("ask:"):
            return InputRequired(text[len("ask:") :].strip() or "What do you want to say?")
        if text.startswith("sleep:"):
            seconds = _seconds(text[len("sleep:") :])
            for second in range(1, int(seconds) + 1):
                await asyncio.sleep(1)
                await ctx.status(f"slept {second} of {seconds:g} s")
            await asyncio.sleep(seconds - int(seconds))
            await ctx.artifact(text=f"slept {seconds:g} s", name="echo")
            return None
        await ctx.artifact(text=text, name="echo")
        return None


def _seconds(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"sleep: needs a number of seconds, not {raw.strip()!r}") from None
    if not 0 <= value <= 3600:
        raise ValueError("sleep: takes 0 to 3600 seconds")
    return value


def echo_card(url: str) -> AgentCard:
    return build_card(
        "echo",
        url,
        description="Echoes text back; 'ask: Q' asks Q, 'sleep:N' works for N seconds,"
        " 'reply: T' answers T as a message, 'tokens: W…' streams the words",
        skills=[
            skill(
                "echo",
                "Echo the message back as an artifact",
                "echo",
                "test",
                examples=["hello", "ask: What is your name?", "sleep:3", "tokens: one two"],
            )
        ],
    )


def echo_extended_card(url: str) -> AgentCard:
    """What a signed-in caller sees (`GetExtendedAgentCard`): each of echo's commands as a
    skill of its own."""
    card = echo_card(url)
    commands = [
        skill("ask", "'ask: Q' asks Q (INPUT_REQUIRED); the follow-up completes the task", "test"),
        skill("sleep", "'sleep:N' works N seconds, a status a second (cancel, subscribe)", "test"),
        skill("reply", "'reply: T' answers T as a direct Message", "test"),
        skill("tokens", "'tokens: W…' streams the words as chunks of one artifact", "test"),
    ]
    return card.model_copy(update={"skills": [*card.skills, *commands]})
