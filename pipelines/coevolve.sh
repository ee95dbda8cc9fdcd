#!/usr/bin/env bash
# N co-evolution epochs, resuming: completed stages are no-ops, so after a crash run it again.
#
#   pipelines/coevolve.sh RUN_DIR EPOCHS
#
# Same environment variables as epoch.sh (TRAIN, GENENV). The same as one command: genenv run --epochs N (it also
# runs every stage in a process of its own, but cannot put the training stages under a launcher).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 RUN_DIR EPOCHS" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
for epoch in $(seq 1 "$2"); do
  "$here/epoch.sh" "$1" "$epoch"
done
${GENENV:-genenv} status --run "$1"
