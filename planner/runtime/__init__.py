"""Executing a plan on torch.distributed: ``planner.apply`` and ``meshplan run``.

One file per parallelism technique (torchtitan style): ``mesh`` (the DeviceMesh in the plan's rank
order), ``tensor_parallel`` (DTensor TP / SP / loss parallel), ``fsdp`` (FSDP2), ``recompute``
(activation checkpointing), ``pipeline`` (torch.distributed.pipelining), ``context_parallel``;
``apply`` puts them together, ``record`` is the run record, ``run`` the measured training loop.
Nothing outside this package imports it except through ``planner.apply`` and ``meshplan run``.
"""
