"""Serving cost model: prefill, decode, KV cache and continuous batching, priced with the training
model's own GEMM, attention and collective costs (``costmodel.kernels``, ``costmodel.comm``,
``costmodel.flops``, ``costmodel.params``). Pure functions; nothing here imports planner/, search/ or
profiles/."""
