"""The orchestrator CLI: `python -m orchestrator` (see the orchestrator issue)."""
