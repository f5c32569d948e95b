"""Serving search: every per-instance parallelism, replica count and batch, aggregated and
disaggregated, priced by ``costmodel.serving``; the fastest deployment per GPU that meets the latency
targets, its runners-up and the Pareto frontier. Never imports ``planner``."""

from search.serving.core import ServingSearchResult, ServingTargets, search_serving
from search.serving.types import Candidate

__all__ = ["Candidate", "ServingSearchResult", "ServingTargets", "search_serving"]
