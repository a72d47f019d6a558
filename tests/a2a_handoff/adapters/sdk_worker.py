"""An Agents SDK agent with a tool that does work (run as a process).

python -m tests.a2a_handoff.adapters.sdk_worker worker --port P --store URL
    --llm-url URL --work-log FILE

`pay(order)` appends a line to the work log (not keyed: a tool run twice logs twice).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn
from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI

from a2a_handoff import build_card, create_app, open_store
from a2a_handoff.adapters.openai_agents import from_agents_sdk


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--llm-url", required=True)
    parser.add_argument("--work-log", type=Path, required=True)
    args = parser.parse_args()

    @function_tool
    def pay(order: str) -> str:
        """Pay the refund of an order."""
        with args.work_log.open("a") as log:
            log.write(f"{order}\n")
        return f"paid order {order}"

    client = AsyncOpenAI(base_url=args.llm_url, api_key="unused", max_retries=0)
    model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
    agent = Agent(name=args.name, instructions="Pay refunds.", tools=[pay], model=model)
    url = f"http://127.0.0.1:{args.port}/"
    app = create_app(from_agents_sdk(agent), build_card(args.name, url), open_store(args.store))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
