"""What the native runtime's selective recomputation keeps of a traced generic layer.

``planner.runtime.recompute`` runs a ``selective`` layer under ``torch.utils.checkpoint`` with
torchtitan's op-level policy (``_custom_policy`` in ``torchtitan/models/llama3/infra/parallelize.py``):
the outputs of the SDPA kernels and of the 1st, 3rd, ... ``mm`` / ``addmm`` of each call are saved,
every other op is recomputed in backward, and the checkpoint keeps the layer's input. A layer of
convolutions, norms and pointwise ops therefore keeps only its input, as under full recomputation.
This module sums, from a layer's recorded forward ops, the bytes the policy saves beside the input.
"""

from __future__ import annotations

import math
from typing import Iterable

from costmodel.local import ACT_BYTES
from planner.intake.trace.record import OpRecord

POLICY_MATMULS = ("aten.mm", "aten.addmm")
"""The ops the policy numbers and saves every other one of (``planner.runtime.recompute._MATMULS``)."""
SDPA_OP = "aten.scaled_dot_product_attention"
"""How the trace records an SDPA call (``planner.intake.trace.record.Recorder.sdpa``)."""
LSE_BYTES_PER_ROW = 4
"""The fp32 log-sum-exp per query row that the flash / efficient SDPA kernels return beside their
output (``aten._scaled_dot_product_flash_attention``: ``logsumexp`` of shape (b, h, s_q), fp32)."""


def _out_bytes(op: OpRecord) -> float:
    """Bytes of the op's floating-point outputs at training precision (bf16, as the runtime computes)."""
    return float(sum(math.prod(shape) * ACT_BYTES for shape, dtype in zip(op.out_shapes, op.out_dtypes)
                     if dtype.startswith(("float", "bfloat"))))


def selective_saved_bytes(ops: Iterable[OpRecord]) -> float:
    """Bytes the op-level selective policy saves for one forward of a layer whose own (non-glue) ops
    are ``ops`` in forward order: each SDPA output with its log-sum-exp rows, and the output of every
    odd-numbered ``mm`` / ``addmm`` (``planner.runtime.recompute._op_level_policy``). The layer's input,
    which the checkpoint also keeps, is not included (the cost model counts it as the previous layer's
    output, as under full recomputation)."""
    saved, matmuls = 0.0, 0
    for op in ops:
        if op.glue:
            continue  # container code between units runs outside the layer's checkpoint
        if op.op == SDPA_OP:
            rows = math.prod(op.out_shapes[0][:-1]) if op.out_shapes else 0
            saved += _out_bytes(op) + rows * LSE_BYTES_PER_ROW
        elif op.op in POLICY_MATMULS:
            matmuls += 1
            if matmuls % 2 == 1:
                saved += _out_bytes(op)
    return saved
