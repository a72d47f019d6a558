"""The example agents driven by a language model: `--llm` (with `--llm-url` or
$OPENAI_BASE_URL set; keyword routing otherwise)."""

from __future__ import annotations

import argparse
import os
import sys

from a2a_handoff.llm import BASE_URL_ENV, MODEL_ENV, Model

DEFAULT_MODEL = "llama3.2"  # what `ollama pull llama3.2` fetches; any model the endpoint has


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("language model (triage, billing; docs/llm.md)")
    group.add_argument(
        "--llm",
        action="store_true",
        help="let a model decide (needs --llm-url or $OPENAI_BASE_URL)",
    )
    group.add_argument(
        "--llm-url", default=None, help=f"an OpenAI-compatible endpoint (${BASE_URL_ENV})"
    )
    group.add_argument(
        "--llm-model",
        default=None,
        help=f"the model's name (${MODEL_ENV}; default {DEFAULT_MODEL})",
    )
    group.add_argument(
        "--llm-timeout", type=float, default=120.0, help="seconds a model call may take"
    )
    group.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="native",
        help="triage: agents-sdk (the OpenAI Agents SDK, needs a model); billing: langgraph"
        " (docs/adapters.md)",
    )


FRAMEWORKS = ("native", "agents-sdk", "langgraph")


def model(args: argparse.Namespace) -> Model | None:
    """The model `--llm` asks for, or None: keyword routing (said once on stderr)."""
    if not getattr(args, "llm", False) and getattr(args, "framework", None) != "agents-sdk":
        return None
    url = args.llm_url or os.environ.get(BASE_URL_ENV)
    if not url:
        if args.llm:
            print(
                f"--llm: no --llm-url and no ${BASE_URL_ENV}: routing by keywords", file=sys.stderr
            )
        return None
    name = args.llm_model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    return Model(name, url, timeout=args.llm_timeout, read_timeout=min(60.0, args.llm_timeout))
