#!/usr/bin/env bash
# Guess the number, trained end to end (examples/openenv_guess/README.md): set-up and build with
# the test requirements (openenv-core), then — when they are absent — the policy's model folder
# and the demonstrations:
#   build/bin/astraflow init-model runs/openenv_guess/model --hidden-size 96 --layers 3 ...
#   .venv/bin/python examples/openenv_guess/demonstrations.py --out runs/openenv_guess/demonstrations.jsonl
# and then what scripts/quickstart.sh does with the config: the SFT warm start when
# runs/openenv_guess/sft.h5 is absent (it plays the demonstrations against the server), and
#   mpirun -np 4 build/bin/astraflow run examples/openenv_guess/config.yaml
# Extra arguments go to `astraflow run` (e.g. --set run.seed=2).
set -euo pipefail
cd "$(dirname "$0")/../.."
ASTRAFLOW_REQUIREMENTS=test bash scripts/setup.sh
source scripts/env.sh
out=runs/openenv_guess
if [ ! -f "$out/model/config.json" ]; then
  build/bin/astraflow init-model "$out/model" --hidden-size 96 --layers 3 --heads 4 --kv-heads 2 --head-dim 24 \
    --intermediate-size 256 --max-positions 512 --seed 1 >/dev/null
fi
if [ ! -f "$out/demonstrations.jsonl" ]; then
  .venv/bin/python examples/openenv_guess/demonstrations.py --out "$out/demonstrations.jsonl" --games 2000
fi
exec bash scripts/quickstart.sh examples/openenv_guess/config.yaml "$@"
