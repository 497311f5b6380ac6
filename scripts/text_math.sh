#!/usr/bin/env bash
# The text-native demo (configs/text_math.yaml, docs/tasks.md): set-up and build, then — when
# they are absent — the policy's model folder and the word-problem dataset:
#   build/bin/astraflow init-model runs/text_math/model --hidden-size 96 --layers 3 ...
#   .venv/bin/python scripts/make_word_problems.py --out runs/text_math/data
# and then what scripts/quickstart.sh does with the config: the SFT warm start when
# runs/text_math/sft.h5 is absent, and mpirun -np 4 build/bin/astraflow run configs/text_math.yaml.
# Extra arguments go to `astraflow run` (e.g. --set run.max_wall_seconds=60).
set -euo pipefail
cd "$(dirname "$0")/.."
ASTRAFLOW_REQUIREMENTS=build bash scripts/setup.sh
source scripts/env.sh
out=runs/text_math
if [ ! -f "$out/model/config.json" ]; then
  build/bin/astraflow init-model "$out/model" --hidden-size 96 --layers 3 --heads 4 --kv-heads 2 --head-dim 24 \
    --intermediate-size 256 --max-positions 128 --seed 1 >/dev/null
fi
if [ ! -f "$out/data/eval.jsonl" ]; then
  .venv/bin/python scripts/make_word_problems.py --out "$out/data" --train 20000 --eval 400 --max 99 --seed 1
fi
exec bash scripts/quickstart.sh configs/text_math.yaml "$@"
