"""Suite-wide settings: property-based tests draw the same examples on every run.

Hypothesis draws new random examples on each run unless told otherwise, so a run of the README's
test command could fail on an example no earlier run drew: a real finding, but one that blocks
whoever happens to run CI that day (a fuzz test once drew ``top_k=0`` that way). The ``ci`` profile,
loaded by default, derandomizes every test (examples derived from the test itself, no example
database); ``HYPOTHESIS_PROFILE=explore python -m pytest tests/fuzz`` draws fresh examples to hunt
for new failures, which then become ``@example`` cases.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
