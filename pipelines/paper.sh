#!/usr/bin/env bash
# The GenEnv paper's protocol as one command: the co-evolution, then every benchmark under --protocol paper,
# ending with Table 1's layout (this run's numbers from its evaluate results, beside the paper's rows).
#
#   genenv init RUN --preset paper --domain alfworld --domain bfcl --domain api-bank --domain bamboogle \
#     --domain travelplanner             # once; --set overrides what you need to change
#   ALFWORLD_DATA=... BFCL_DATA=... API_BANK_DATA=... BAMBOOGLE_DATA=... TRAVELPLANNER_DATA=... pipelines/paper.sh RUN
#
# EPOCHS (default 10, the paper's) epochs run through coevolve.sh, so a rerun resumes where it stopped. Each
# *_DATA is the benchmark's official files (a file or folder, as `genenv evaluate --data` takes); one left unset
# makes evaluate use its cached download, which needs the network. GENENV and TRAIN as in epoch.sh; TRAIN defaults
# to the sharded launch the preset's full fine-tuning needs, FSDP over every GPU (GPUS, by default the number
# nvidia-smi lists; with one GPU or none, plain $GENENV):
#   accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml --num_processes 8 -m genenv_cli
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 RUN_DIR" >&2
  exit 2
fi
run=$1
here=$(cd "$(dirname "$0")" && pwd)
genenv=${GENENV:-genenv}
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
if [ -z "${TRAIN:-}" ] && [ "${gpus:-0}" -gt 1 ]; then
  export TRAIN="accelerate launch --config_file $here/accelerate/fsdp-full-shard.yaml --num_processes $gpus -m genenv_cli"
fi

"$here/coevolve.sh" "$run" "${EPOCHS:-10}"

evaluate() {  # evaluate BENCH DATA
  if [ -n "$2" ]; then
    $genenv evaluate --bench "$1" --protocol paper --run "$run" --data "$2"
  else
    $genenv evaluate --bench "$1" --protocol paper --run "$run"
  fi
}
evaluate alfworld      "${ALFWORLD_DATA:-}"
evaluate bfcl          "${BFCL_DATA:-}"
evaluate api-bank      "${API_BANK_DATA:-}"
evaluate bamboogle     "${BAMBOOGLE_DATA:-}"
evaluate travelplanner "${TRAVELPLANNER_DATA:-}"
$genenv table --run "$run" --protocol paper
