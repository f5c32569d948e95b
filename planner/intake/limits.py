"""The largest model meshplan reads: bounds that every model reader (presets, config files, traces) applies."""

MAX_LAYERS = 100_000
"""Most layers a model may have."""
MAX_SIZE = 2**31
"""Largest width, vocabulary, head or expert count of a layer (any real model is far below)."""
MAX_PARAMS = 2**50
"""Largest parameter count of one traced layer: recommender embedding tables reach 2^40 (DLRM-scale
tables of 10^12 rows x dims), far beyond any width."""
MAX_PER_TOKEN = 1e18
"""Largest per-token FLOP or byte total of a traced layer."""
