#!/usr/bin/env bash
# One co-evolution epoch as a shell pipeline over the genenv CLI.
#
#   pipelines/epoch.sh RUN_DIR EPOCH
#
# Each stage is skipped when it is already done with unchanged inputs, so rerunning this script after a
# failure resumes at the stage that failed. The training stages can run under a launcher for several GPUs:
#
#   TRAIN="accelerate launch --config_file pipelines/accelerate/ddp.yaml -m genenv_cli" pipelines/epoch.sh runs/exp1 3
#   TRAIN="accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml -m genenv_cli" ...  # full fine-tuning
#
# The config file says how training shards (pipelines/accelerate/: ddp.yaml, fsdp-full-shard.yaml, zero3.yaml; add
# --num_processes N for other than 8 GPUs).
#
# GENENV (default: genenv) is the command used for the other stages.
#
# Generation on every GPU: rollout runs as one shard per GPU (`rollout --shard I/N`), shard I with
# CUDA_VISIBLE_DEVICES=I-1, all at once; score merges them. N is GPUS, by default the number of GPUs nvidia-smi
# lists (0 or 1: one rollout process). With vllm.tensor_parallel_size = T, set GPUS to the GPU count and
# TP=T: each of the GPUS/T shards then gets T GPUs (shard I: GPUs (I-1)*T .. I*T-1).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 RUN_DIR EPOCH" >&2
  exit 2
fi
run=$1
epoch=$2
genenv=${GENENV:-genenv}
train=${TRAIN:-$genenv}

$genenv generate-tasks --run "$run" --epoch "$epoch"
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
tp=${TP:-1}
shards=$(( ${gpus:-0} / tp ))
if [ "$shards" -gt 1 ]; then
  pids=()
  for i in $(seq 1 "$shards"); do
    devices=$(seq -s, $(( (i - 1) * tp )) $(( i * tp - 1 )))
    CUDA_VISIBLE_DEVICES=$devices $genenv rollout --run "$run" --epoch "$epoch" --shard "$i/$shards" &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ "$failed" -eq 0 ] || { echo "epoch.sh: a rollout shard failed; rerun to redo only the failed ones" >&2; exit 1; }
else
  $genenv rollout        --run "$run" --epoch "$epoch"
fi
$genenv score          --run "$run" --epoch "$epoch"
$train  update-agent   --run "$run" --epoch "$epoch"
$train  update-env     --run "$run" --epoch "$epoch"
$genenv eval-agent     --run "$run" --epoch "$epoch"
