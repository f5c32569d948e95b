#!/usr/bin/env bash
# Megatron-LM launch for gpt3-175b on 128 GPUs (dgx-a100): tp 8 x pp 8 x cp 1 x dp 2, ep 1, zero 1, interleaved-1f1b, micro-batch 1, 128 micro-batches
# note: tokenizer, vocabulary and data: pass --tokenizer-type/--data-path (or --mock-data) yourself
# Run on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set; pass data and tokenizer
# arguments after the script name: ./launch.sh --data-path ... --tokenizer-type ...
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

DISTRIBUTED_ARGS=(
    --nproc_per_node 8
    --nnodes 16
    --node_rank "${NODE_RANK:-0}"
    --master_addr "${MASTER_ADDR:-localhost}"
    --master_port "${MASTER_PORT:-6000}"
)

GPT_MODEL_ARGS=(
    --num-layers 96
    --hidden-size 12288
    --ffn-hidden-size 49152
    --num-attention-heads 96
    --seq-length 2048
    --max-position-embeddings 2048
    --position-embedding-type learned_absolute
    --normalization LayerNorm
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 256
    --bf16
    --recompute-granularity selective
    --recompute-modules core_attn
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 8
    --context-parallel-size 1
    --expert-model-parallel-size 1
    --sequence-parallel
    --num-virtual-stages-per-pipeline-rank 4
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \
    "${GPT_MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${MODEL_PARALLEL_ARGS[@]}" "$@"
