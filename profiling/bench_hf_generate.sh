#!/usr/bin/env bash
# Greedy generation from a Qwen3-0.6B-shaped random folder on CPU, batch 1 with the KV cache:
# astraflow's engine (build/bin/bench_hf_generate) against transformers' generate on the same
# weights (float32), prompt and thread count; each side is warmed up once, then timed once.
# Checks that both greedy continuations are the same ids and prints tokens/s and the ratio.
#   profiling/bench_hf_generate.sh [new_tokens] [threads] [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:-32}
threads=${2:-2}
preset=${3:-qwen3-0.6b}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build/bin/astraflow init-model "$dir/m" --preset "$preset" --dtype bfloat16 --seed 1 > /dev/null
ours=$(build/bin/bench_hf_generate "$dir/m" "$new" "$threads" 16)
theirs=$(.venv/bin/python - "$dir/m" "$new" "$threads" <<'PY'
import json, sys, time
import torch
from transformers import AutoModelForCausalLM
folder, new, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
prompt = torch.tensor([[100 + 7 * i for i in range(16)]])
kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)
with torch.no_grad():
    model.generate(prompt, **kw)  # warm-up
    start = time.perf_counter()
    out = model.generate(prompt, **kw)
    seconds = time.perf_counter() - start
ids = out[0, 16:].tolist()
print(json.dumps({"tokens_per_s": round(len(ids) / seconds, 3), "seconds": round(seconds, 3), "ids": ids}))
PY
)
echo "astraflow:    $ours"
echo "transformers: $theirs"
.venv/bin/python -c "
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
same = a['ids'] == b['ids'][:len(a['ids'])]
print('greedy continuations equal: %s' % same)
print('ratio astraflow/transformers: %.2fx' % (a['tokens_per_s'] / b['tokens_per_s']))
" "$ours" "$theirs"
