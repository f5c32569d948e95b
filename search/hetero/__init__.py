"""The heterogeneous search: plans for mixed GPU types, slow GPUs and lost nodes.

How the parts fit, from the bottom up:

- ``types``: what the search is asked (:class:`HeteroRequest`, :class:`ReplicaSpec`) and what it
  returns (:class:`HeteroCandidate`); plain data, the only part the planner needs to read a result.
- ``units``: TP units, pools of equal units, replica kinds (one or two pools) and mixes of kinds.
- ``price``: :class:`Pricing`, the cost model on each stage's own hardware; both the search and
  ``estimate --plan`` price through it, so they agree to the last bit.
- ``curve``: a kind's step time as a function of its micro-batches, T_k(m), evaluated cheaply.
- ``alloc``: the exact threshold split of the micro-batches over the replicas of a mix.
- ``bound``: a per-mix lower bound, so that only mixes that can win are priced.
- ``search``: :func:`search_hetero`, which walks base options and mixes with the parts above.
- ``gap``: a lower bound over the whole space, for the proven gap the plan records.
- ``baselines``: the homogeneous alternatives (planned by ``search.core``) the gain is measured on.
- ``exhaustive``: brute force over small spaces, written apart from the shortcuts, to check them.

Nothing here imports ``planner``; the homogeneous search (``search.core``) does not import this package.
"""
