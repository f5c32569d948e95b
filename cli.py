"""``meshplan`` entry point (console script ``meshplan = "cli:main"``, or ``python cli.py``).

Thin by design: the command line lives in :mod:`planner.cli`, imported inside :func:`main` so that a
Ctrl-C during the imports (the first fraction of a second) exits 130 with one line like any other
interrupt, instead of a ``KeyboardInterrupt`` traceback from the import machinery.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``planner.cli.main``) and return its exit code."""
    try:
        from planner.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("meshplan: interrupted\n")
        return 130
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
