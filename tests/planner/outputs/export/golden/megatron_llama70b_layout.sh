#!/usr/bin/env bash
# Megatron-LM launch for llama3.1-70b on 64 GPUs (dgx-h100): tp 2 x pp 4 x cp 2 x dp 4, ep 1, zero 1, 1f1b, micro-batch 1, 128 micro-batches
# note: positions: no learned table in the model, emitted as rope; add --rotary-base / rope scaling for your model (Megatron-LM has no ALiBi: change it for ALiBi models)
# note: tokenizer, vocabulary and data: pass --tokenizer-type/--data-path (or --mock-data) yourself
# Run on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set; pass data and tokenizer
# arguments after the script name: ./launch.sh --data-path ... --tokenizer-type ...
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

DISTRIBUTED_ARGS=(
    --nproc_per_node 8
    --nnodes 8
    --node_rank "${NODE_RANK:-0}"
    --master_addr "${MASTER_ADDR:-localhost}"
    --master_port "${MASTER_PORT:-6000}"
)

GPT_MODEL_ARGS=(
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 131072
    --position-embedding-type rope
    --swiglu
    --normalization RMSNorm
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 512
    --bf16
    --recompute-granularity full
    --recompute-method block
    --recompute-num-layers 2
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --pipeline-model-parallel-size 4
    --context-parallel-size 2
    --expert-model-parallel-size 1
    --sequence-parallel
    --pipeline-model-parallel-layout 'E,t*19|t*21|t*21|t*19,L'
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \
    "${GPT_MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${MODEL_PARALLEL_ARGS[@]}" "$@"
