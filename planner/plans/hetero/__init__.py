"""Plans for mixed or degraded clusters: the heterogeneous half of ``planner.plans``.

How the parts fit:

- ``plan``: the entry point. Given a cluster of several groups (or one with ``--slow`` / ``--down``,
  loaded by ``planner.intake.groups``), :func:`plan_hetero` runs ``search.hetero.search.search_hetero`` for the
  native target and builds the plan.
- ``uniform``: for engines that cannot run heterogeneous plans (megatron, torchtitan, deepspeed),
  the best homogeneous plan on healthy GPUs of one type.
- ``schema``: the plan JSON's ``hetero`` section (groups, replicas, stages, shares, baselines).
- ``specs``: a plan's replicas as the search's specs; ``planner.estimation.hetero_result`` re-prices
  them with the search's own pricing and states the contract's estimate (what ``estimate --plan`` prints).
- ``gain``: the plan's speedup over each homogeneous alternative, recorded beside the plan.
- ``checks``: the validator, written apart from the search: devices, groups, layers and shares.
"""
