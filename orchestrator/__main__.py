"""`python -m orchestrator`: placeholder entry until the orchestrator lands."""

from __future__ import annotations

import sys


def main() -> int:
    print("the orchestrator CLI is not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
