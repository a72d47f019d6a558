"""Label values: short names for what the metrics and log lines name."""

STATE_PREFIX = len("TASK_STATE_")


def short_state(state: str) -> str:
    """A state's short name, its label: `working` for `TASK_STATE_WORKING` (a plain str,
    even from a StrEnum member)."""
    return state[STATE_PREFIX:].lower()
