"""Runnable example agents: `python -m servers NAME --port P --store URL`."""
