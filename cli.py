"""``meshplan`` entry point (console script ``meshplan = "cli:main"``, or ``python cli.py``).

Thin by design: the command line lives in :mod:`planner.cli`.
"""

from __future__ import annotations

import sys

from planner.cli import main

if __name__ == "__main__":
    sys.exit(main())
