"""The three-phase atomic handoff: envelope, sender, delivery, outbox recovery, receiver, ledger.

Nothing here imports the runtime: the runtime drives the handoff through `Handoffs` and
passes what it needs (a store, a client, a lease holder, callbacks).
"""
