"""The A2A wire: models, states, the handoff extension, the agent card, SSE framing.

Everything here is data and pure functions over it: no I/O, nothing that knows a store, a
server or a client. Every other room of the package may import it; it imports none of them.
"""
