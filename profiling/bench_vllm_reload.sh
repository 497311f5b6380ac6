#!/usr/bin/env bash
# What one version costs a vLLM server, at a model's shape: the folder's bytes (what the server
# reads), and the seconds of each call of the update (`api: vllm`, docs/rollout-backends.md) —
# /pause?mode=wait, /collective_rpc reload_weights, /reset_prefix_cache, /update_weight_version,
# /resume — with the server idle, alternating between two random folders of the preset (bf16,
# seeds 1 and 2) so that every reload changes every tensor. Checks that a greedy completion
# follows the folder loaded (the same ids and log-probs after a reload of the same folder, others
# after the other folder's). Needs .venv-vllm (scripts/setup.sh) or ASTRAFLOW_VLLM_PYTHON.
#   profiling/bench_vllm_reload.sh [preset=qwen3-0.6b] [updates=6] [port=18611]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-qwen3-0.6b}
updates=${2:-6}
port=${3:-18611}
vpython=${ASTRAFLOW_VLLM_PYTHON:-.venv-vllm/bin/python}
[ -x "$vpython" ] || { echo "no vLLM at $vpython (scripts/setup.sh makes .venv-vllm)"; exit 1; }
dir=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
for seed in 1 2; do
  build/bin/astraflow init-model "$dir/m$seed" --preset "$preset" --dtype bfloat16 --seed "$seed" >/dev/null
done
bytes=$(cat "$dir"/m1/*.safetensors | wc -c)
VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=0-1 "$vpython" \
  -m vllm.entrypoints.openai.api_server --model "$dir/m1" --port "$port" --dtype bfloat16 --max-model-len 256 \
  >"$dir/server.log" 2>&1 &
server=$!
start=$(date +%s)
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  kill -0 "$server" 2>/dev/null || { tail -n 20 "$dir/server.log"; exit 1; }
  sleep 2
done
echo "vLLM up after $(($(date +%s) - start)) s; folder: $bytes bytes of safetensors ($preset, bf16)"
.venv/bin/python - "$port" "$dir" "$updates" "$bytes" <<'PY'
import json, sys, time, urllib.request
port, folder, updates, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = f"http://127.0.0.1:{port}"

def post(path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = r.read()
    return time.perf_counter() - t, out

def greedy():  # the greedy continuation's token ids with their log-probs (the weights' fingerprint)
    _, out = post("/v1/completions", {"model": folder + "/m1", "prompt": [100 + i for i in range(16)],
                                      "max_tokens": 8, "temperature": 0, "logprobs": 0,
                                      "return_tokens_as_token_ids": True})
    lp = json.loads(out)["choices"][0]["logprobs"]
    return [(t, round(p, 3)) for t, p in zip(lp["tokens"], lp["token_logprobs"])]

calls = ["pause", "reload_weights", "reset_prefix_cache", "update_weight_version", "resume"]
rows, texts = [], {}
texts[1] = greedy()
for u in range(updates):
    seed = 2 if u % 2 == 0 else 1
    t = {}
    t["pause"], _ = post("/pause?mode=wait")
    t["reload_weights"], _ = post("/collective_rpc", {"method": "reload_weights",
                                                       "kwargs": {"weights_path": f"{folder}/m{seed}"}})
    t["reset_prefix_cache"], _ = post("/reset_prefix_cache")
    t["update_weight_version"], _ = post("/update_weight_version", {"new_version": str(u + 1)})
    t["resume"], _ = post("/resume")
    text = greedy()
    if seed in texts and texts[seed] != text:
        sys.exit(f"update {u}: folder m{seed} gave {text!r}, before {texts[seed]!r}")
    texts.setdefault(seed, text)
    rows.append(t)
if texts[1] == texts[2]:
    sys.exit("the two folders gave the same completion: the reload changed nothing")
print("%-22s %s" % ("call", "  ".join("%8s" % f"v{u + 1}" for u in range(updates))) + "   median")
for c in calls:
    vals = sorted(r[c] for r in rows)
    print("%-22s %s   %.3f s" % (c, "  ".join("%8.3f" % r[c] for r in rows), vals[len(vals) // 2]))
total = sorted(sum(r.values()) for r in rows)
med = total[len(total) // 2]
print(f"paused per version (median): {med:.3f} s; the server read {size / 2**20:.0f} MiB, "
      f"{size / 2**20 / med:.0f} MiB/s; completions follow the folder loaded: yes")
PY
