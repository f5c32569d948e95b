"""Capacity planning: the best plan for every point of a grid of clusters, GPU counts, batches and
sequence lengths, and what training on a token budget costs with each (time, GPU-hours, money,
energy), with the smallest GPU count per cluster that meets a deadline.

``planner.sweep(...)`` (``planner.capacity.api.sweep``) runs it; ``meshplan sweep`` is its command
line. Modules: ``grid`` (parsing), ``batch`` (McCandlish et al. 2018), ``economics`` (time, cost,
energy), ``runner`` / ``ray_backend`` (executing the searches), ``assemble`` (points from outcomes),
``result`` (the JSON / CSV schema), ``report`` (the HTML page).
"""
