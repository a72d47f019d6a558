"""The adapters' frameworks are optional extras: the library and the example agents import
none of them until an adapter is asked for."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT

FRAMEWORKS = ("agents", "langgraph", "langchain_core")


def test_importing_the_library_and_the_servers_pulls_no_framework() -> None:
    code = (
        "import sys, a2a_handoff, a2a_handoff.adapters, a2a_handoff.llm, servers.__main__\n"
        f"found = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})\n"
        "print(found)\n"
        "assert not found"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
