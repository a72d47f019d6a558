"""The runs this process drives, shared by the task manager's collaborators.

Invariants: one task has at most one run here (`by_task`), and a dedupe key names at most one
run while its task is not yet stored (`creating`): from then on the store answers for the key.
"""

from __future__ import annotations

import dataclasses

from a2a_handoff.runtime.run import TaskRun


@dataclasses.dataclass
class Runs:
    """The running handlers by task id, the new ones by dedupe key, the stranded task ids."""

    by_task: dict[str, TaskRun] = dataclasses.field(default_factory=dict)
    creating: dict[str, TaskRun] = dataclasses.field(default_factory=dict)
    stranded: set[str] = dataclasses.field(default_factory=set)  # the store failed their runs

    def add(self, run: TaskRun, key: str | None = None) -> None:
        """Register a run (and the dedupe key it creates its task for)."""
        if key is not None:
            self.creating[key] = run
        self.by_task[run.task.id] = run

    def created(self, run: TaskRun) -> None:
        """The run's task is stored: its key is the store's to answer now."""
        if run.dedupe_key is not None and self.creating.get(run.dedupe_key) is run:
            del self.creating[run.dedupe_key]

    def forget(self, run: TaskRun) -> None:
        """The run is over (settled or aborted)."""
        if self.by_task.get(run.task.id) is run:
            del self.by_task[run.task.id]
        self.created(run)
