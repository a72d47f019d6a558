"""The task engine: runs agent handlers and turns what they emit into durable task steps.

`tasks.TaskManager` creates, continues, cancels and looks up tasks (through `creating`,
`receiving`, `continuing`, `cancelling`, `lookup` and `sweeps`); `run.TaskRun` drives one
step's handler to its outcome, one phase at a time (`phases`), its handler reaching it through
`port.RunPort`; the run's `journal.Journal` writes what the step emitted, grouped, one
transaction a step. The runtime drives the handoff machinery (`a2a_handoff.handoff`) and is
driven by the server; it never imports the server.
"""
