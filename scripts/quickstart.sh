#!/usr/bin/env bash
# The main job on its embedded default: set-up (packages + build), then
#   mpirun -np 4 build/bin/astraflow run configs/quickstart.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
config=${1:-configs/quickstart.yaml}
np=$(build/bin/astraflow layout-size "$config")
exec mpirun -np "$np" build/bin/astraflow run "$config"
