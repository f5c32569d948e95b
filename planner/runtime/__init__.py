"""Executing a plan on torch.distributed: ``planner.apply`` and ``meshplan run``.

One file per parallelism technique (torchtitan style): ``mesh`` (the DeviceMesh in the plan's rank
order), ``tensor_parallel`` (DTensor TP / SP / loss parallel, with ``column_group``: one gradient reduction
per sublayer), ``expert_parallel`` (MoE experts over an EP group, all-to-all dispatch), ``fsdp``
(FSDP2), ``recompute``
(activation checkpointing), ``pipeline`` (torch.distributed.pipelining), ``context_parallel`` (the
refusal, for now). ``layers`` maps the plan's layers to module names, ``stage`` runs a chunk of them,
``models`` builds the torch module of a preset, config.json or factory, ``init`` gives a runtime the
unsplit model's seeded weights; ``apply`` puts them together, ``run`` is the measured training loop
of ``meshplan run``, ``record`` its run record and ``report`` the record as text. The memory check
(``memcheck*``) and ``profile`` build on them. Nothing outside this package imports it except
through ``planner.apply`` and the CLI commands.
"""
