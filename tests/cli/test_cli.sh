#!/usr/bin/env bash
# End-to-end checks of the astraflow program as users run it: validate, layout-size, run
# under mpirun (sm and ucx one-sided components), and the bad-input paths — one clear line on
# stderr, a non-zero exit, no signal, no hang.
#   test_cli.sh <astraflow binary> <source dir> <mpiexec>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3
h5dump=${ASTRAFLOW_H5DUMP:-h5dump}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_rc <want: 0|nonzero> <name> -- command...   (stdout+stderr saved to $work/<name>.out)
expect_rc() {
  local want=$1 name=$2; shift 3
  timeout 120 "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  if [ $rc -eq 124 ]; then fail "$name: hung (killed after 120 s)"; return; fi
  if [ $rc -gt 128 ]; then fail "$name: died by signal $((rc - 128))"; return; fi
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then fail "$name: exit $rc, wanted 0"; cat "$work/$name.err"; fi
  if [ "$want" = nonzero ] && [ $rc -eq 0 ]; then fail "$name: exit 0, wanted an error"; fi
}
# expect_text <name> <stream: out|err> <text> [count]
expect_text() {
  local n
  n=$(grep -cF -- "$3" "$work/$1.$2")
  if [ "${4:-}" != "" ]; then
    [ "$n" -eq "$4" ] || fail "$1: '$3' appears $n times in std$2, wanted $4: $(head -c 600 "$work/$1.$2")"
  else
    [ "$n" -ge 1 ] || fail "$1: '$3' missing from std$2: $(head -c 600 "$work/$1.$2")"
  fi
}

quick=$src/configs/quickstart.yaml
sed "s|output_dir: .*|output_dir: $work/run|" "$quick" >"$work/quick.yaml"

# validate / layout-size need no MPI.
expect_rc 0 validate_ok -- "$bin" validate "$quick"
expect_text validate_ok out "valid (4 ranks"
# validate takes --set as run does: a bad override is refused naming its key, a good one passes.
expect_rc 0 validate_set -- "$bin" validate "$quick" --set run.versions=3
expect_rc nonzero validate_bad_set -- "$bin" validate "$quick" --set rollout.temperature=-1
expect_text validate_bad_set err "rollout.temperature"
expect_rc 0 layout_size -- "$bin" layout-size "$quick"
[ "$(cat "$work/layout_size.out")" = 4 ] || fail "layout-size printed '$(cat "$work/layout_size.out")', wanted 4"
# warm-start-path and sft take --set as run does (quickstart.sh passes its --set to both).
expect_rc 0 warm_start -- "$bin" warm-start-path "$quick" --set sft.checkpoint="$work/elsewhere.h5"
[ "$(cat "$work/warm_start.out")" = "$work/elsewhere.h5" ] ||
  fail "warm-start-path --set printed '$(cat "$work/warm_start.out")', wanted $work/elsewhere.h5"
expect_rc nonzero sft_bad_set -- "$bin" sft "$quick" --set sft.max_steps=-3
expect_text sft_bad_set err "sft.max_steps"

# The memory plan (docs/memory.md): printed without running; a config past this machine's memory
# (a 70B-parameter policy) is refused by `plan` and by a run before anything is allocated, naming
# the largest items and the keys that shrink them.
expect_rc 0 plan_ok -- "$bin" plan "$quick"
expect_text plan_ok out "fits"
expect_text plan_ok out "trainer:solver"
expect_text plan_ok out "KV block pool"
big=(--set "policies.0.model={d_model: 8192, layers: 80, heads: 64, kv_heads: 8, ffn_hidden: 28672, max_seq_len: 4096}")
expect_rc nonzero plan_big -- "$bin" plan "$quick" "${big[@]}"
expect_text plan_big out "does NOT fit"
expect_text plan_big err "AdamW state (fp32 m and v)"
expect_text plan_big err "shrink with trainer.sharding"

# Every shipped config is valid; a workflow naming an undefined policy is refused by key. Paths
# are relative to the working directory: text_math.yaml's model folder is made there first, as
# scripts/text_math.sh makes it (a smaller one).
"$bin" init-model "$work/runs/text_math/model" --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 \
  --intermediate-size 32 --max-positions 256 >/dev/null || fail "init-model for text_math.yaml"
"$bin" init-model "$work/runs/code/model" --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 \
  --intermediate-size 32 --max-positions 1024 >/dev/null || fail "init-model for the code workflow configs"
for c in "$src"/configs/*.yaml; do
  expect_rc 0 "validate_$(basename "$c" .yaml)" -- bash -c 'cd "$1" && "$2" validate "$3"' _ "$work" "$bin" "$c"
done
sed 's/roles: {solver: solver, verifier: verifier}/roles: {solver: solver, verifier: judge}/' \
  "$src/configs/math_solver_verifier.yaml" >"$work/bad_workflow.yaml"
expect_rc nonzero validate_bad_workflow -- "$bin" validate "$work/bad_workflow.yaml"
expect_text validate_bad_workflow err "workflow.roles.verifier: 'judge' is not a defined policy" 1

sed 's/^dataflow:/dataflw:/' "$quick" >"$work/unknown_key.yaml"
expect_rc nonzero validate_unknown -- "$bin" validate "$work/unknown_key.yaml"
expect_text validate_unknown err "dataflw: unknown key" 1
printf 'run: {name: x\npolicies: [' >"$work/malformed.yaml"
expect_rc nonzero validate_malformed -- "$bin" validate "$work/malformed.yaml"
expect_text validate_malformed err "malformed YAML" 1
expect_rc nonzero validate_missing -- "$bin" validate "$work/nope.yaml"
expect_text validate_missing err "nope.yaml: cannot open the config file" 1

# A device the machine does not have is refused by name, at validate and at start (CI has no
# GPU; on a machine with one these refusals do not apply).
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
  sed 's/^trainer: {/trainer: {device: cuda, /' "$quick" >"$work/cuda.yaml"
  grep -q 'device: cuda' "$work/cuda.yaml" || fail "cuda.yaml: the quickstart's trainer line moved"
  expect_rc nonzero validate_cuda -- "$bin" validate "$work/cuda.yaml"
  expect_text validate_cuda err "trainer.device: 'cuda' asks for a GPU" 1
  expect_rc nonzero run_cuda -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/quick.yaml" --set rollout.device=cuda:0
  expect_text run_cuda err "rollout.device: 'cuda:0' asks for a GPU"
fi

# A layout that does not match the world: one message, every rank leaves.
expect_rc nonzero run_mismatch -- "$mpiexec" -n 3 --oversubscribe "$bin" run "$work/quick.yaml"
expect_text run_mismatch err "layout needs 4 ranks, mpirun started 3" 1
# A bad config under mpirun: printed once, not once per rank.
expect_rc nonzero run_bad_config -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/unknown_key.yaml"
expect_text run_bad_config err "dataflw: unknown key" 1
# Ring windows far beyond the node's memory: refused on all ranks before any allocation.
sed "s|batch_ring: .*|batch_ring: {slots: 16777216, slot_bytes: 1073741824}|" "$work/quick.yaml" >"$work/huge.yaml"
expect_rc nonzero run_huge_window -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/huge.yaml"
expect_text run_huge_window err "ring windows need" 1
# A policy past the node's memory: the memory plan stops the run on every rank, one message.
expect_rc nonzero run_big_model -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/quick.yaml" "${big[@]}" \
  --set run.output_dir="$work/run_big"
expect_text run_big_model err "memory plan: node" 1
expect_text run_big_model err "trainer.micro_batch_tokens"

# A small job end to end under both one-sided components: summary line, the three HDF5 files,
# `astraflow trace`, resume with an override, and a truncated checkpoint refused on resume.
cat >"$work/job.yaml" <<YAML
run: {name: job, output_dir: $work/job, seed: 2, threads_per_rank: 1, versions: 4, checkpoint_every: 2}
policies:
  - name: solver
    model: {d_model: 16, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 32, max_seq_len: 24}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: rollout, policies: [solver], ranks: 2}
rollout: {group_size: 2, max_new_tokens: 4, batch_tasks: 8}
trainer: {groups_per_step: 2}
eval: {problems: 4, every: 2}
elastic: {every: 2}
YAML
# The ucx run also trains in 2 PPO mini-batches (2 of the 4 episodes each) split into packed
# micro-batches of at most 8 tokens, with activation checkpointing and without shared prompts
# (docs/training.md). Every episode is longer than 4 tokens ("a+b=" and an answer), so no two
# share a micro-batch: each step is 2 × 2 forward/backward passes, as the summary's trainer
# figures must say. The sm run shares each group's prompt (trainer.shared_prefix, the default):
# its forward holds fewer tokens than its sequences do.
for osc in sm ucx; do
  rm -rf "$work/job"
  scale=()
  [ $osc = ucx ] && scale=(--set trainer.micro_batch_tokens=8 --set trainer.packing=true --set trainer.mini_batches=2
    --set trainer.activation_checkpointing=true --set trainer.shared_prefix=false)
  expect_rc 0 "job_$osc" -- "$mpiexec" -n 4 --oversubscribe --mca osc $osc "$bin" run "$work/job.yaml" "${scale[@]}"
  python3 - "$work/job/summary.json" $osc 2>"$work/trainer_figures_$osc.err" <<'PY' ||
import json, sys
s = json.load(open(sys.argv[1]))
t = [r for r in s["ranks"] if r["role"] == "trainer"][0]
assert t["peak_rss_bytes"] > 10 << 20, t  # the trainer process's own peak resident set
assert t["device_peak_bytes"] == 0, t     # on the CPU
for r in s["ranks"]:  # the sampled private peak (RssAnon) lies within the resident peak (VmHWM)
    assert 10 << 20 < r["memory_peak_private_bytes"] <= r["memory_peak_rss_bytes"], r
    assert 0 < r["memory_plan_private_bytes"] <= r["memory_plan_bytes"], r
df = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
assert df["memory_plan_private_bytes"] < df["memory_plan_bytes"], df  # its windows are node-shared
if sys.argv[2] == "sm":
    assert 0 < t["forward_tokens"] < t["sequence_tokens"], t
else:
    assert t["forward_tokens"] >= t["sequence_tokens"] > 0, t
assert t["micro_batches"] == (1 if sys.argv[2] == "sm" else 4) * t["steps"], t
PY
    fail "job_$osc: trainer figures: $(cat "$work/trainer_figures_$osc.err")"
  expect_text "job_$osc" err "role map (4 ranks)" 1
  last=$(tail -n 1 "$work/job_$osc.out")
  case "$last" in
    "{"*'"versions":4'*) ;;
    *) fail "job_$osc: last stdout line is not the summary with versions 4: $last" ;;
  esac
  for f in trace.h5 trajectories.h5 summary.json config.yaml checkpoints/step_2.h5 checkpoints/step_4.solver.h5; do
    [ -f "$work/job/$f" ] || fail "job_$osc: $f missing"
  done
  "$h5dump" -H "$work/job/trace.h5" >"$work/dump_trace_$osc.out" 2>&1 || fail "h5dump could not read trace.h5"
  expect_text "dump_trace_$osc" out 'DATASET "events"'
  "$h5dump" -d /events "$work/job/trace.h5" >"$work/dump_events_$osc.out" 2>&1
  for kind in startup train_step memory publish generate serve_batch weight_pull; do
    expect_text "dump_events_$osc" out "\"$kind"
  done
  "$h5dump" -H "$work/job/trajectories.h5" >"$work/dump_traj_$osc.out" 2>&1 || fail "h5dump could not read trajectories.h5"
  for ds in tokens policy_mask reward weight_version_min producer_rank t_finished; do
    expect_text "dump_traj_$osc" out "DATASET \"$ds\""
  done
  "$h5dump" -H "$work/job/checkpoints/step_4.solver.h5" >"$work/dump_ckpt_$osc.out" 2>&1 ||
    fail "h5dump could not read the trainer checkpoint"
  expect_text "dump_ckpt_$osc" out 'GROUP "optimizer"'
  expect_text "dump_ckpt_$osc" out 'DATASET "exp_avg_sq"'
  "$h5dump" -H "$work/job/checkpoints/step_4.h5" >"$work/dump_df_$osc.out" 2>&1 ||
    fail "h5dump could not read the dataflow checkpoint"
  expect_text "dump_df_$osc" out 'GROUP "counters"'
done
expect_rc 0 trace_tables -- "$bin" trace "$work/job"
for heading in trainer rollout staleness dataflow; do expect_text trace_tables out "$heading"; done
# The same figures as JSON agree with the run's own books (summary.json, embedded).
expect_rc 0 trace_json -- "$bin" trace --format json "$work/job"
python3 - "$work/trace_json.out" 2>"$work/trace_json_check.err" <<'PY' ||
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
if s is None:
    sys.exit("no summary embedded")
trained = s["consumed"] + s["replayed"]
checks = [
    ("trainer trajectories", sum(t["trajectories"] for t in r["trainers"]), trained),
    ("trajectories served", r["dataflow"]["trajectories_served"], trained),
    ("staleness histogram total", r["staleness"]["trajectories"], trained),
    ("last published version", r["dataflow"]["last_published_version"], s["versions"]),
    ("trainer last version", max(t["last_version"] for t in r["trainers"]), s["versions"]),
    ("rollout trajectories", sum(x["trajectories"] for x in r["rollouts"]), s["produced"]),
    ("trainer ranks", len(r["trainers"]), sum(1 for x in s["ranks"] if x["role"] == "trainer")),
]
bad = [f"{what}: trace {a}, summary {b}" for what, a, b in checks if a != b]
if bad:
    sys.exit("; ".join(bad))
PY
  fail "trace --format json disagrees with summary.json: $(cat "$work/trace_json_check.err")"
# The balance report: written live every 2 versions, and recomputed from the trace alone with
# the same production figures and the same trainer wait fraction (to 1e-3).
expect_rc 0 balance_text -- "$bin" trace "$work/job" --balance 2
for line in "--- Window (last 2 iterations: v2..v4) ---" "rollout_wait_fraction" "--- Scaling decision ---" \
            "G_target" "--- RaaS Instance Layout" "--- Total: 2 instances, 2 ranks"; do
  expect_text balance_text out "$line"
done
expect_rc 0 balance_json -- "$bin" trace "$work/job" --balance 2 --format json
python3 - "$work/balance_json.out" "$work/job/balance" 2>"$work/balance_check.err" <<'PY' ||
import json, math, sys
replayed = json.load(open(sys.argv[1]))
assert [r["version"] for r in replayed] == [2, 4], [r["version"] for r in replayed]
for r in replayed:
    live = json.load(open(f"{sys.argv[2]}/report_{r['version']}.json"))
    assert r["production"] == live["production"], (r["production"], live["production"])
    a, b = r["window"]["rollout_wait_fraction"], live["window"]["rollout_wait_fraction"]
    assert abs(a - b) < 1e-3, (a, b)
    assert r["scaling_decision"]["G_target"] >= 1 and r["production"]["total_raas_ranks"] == 2
PY
  fail "trace --balance disagrees with the live balance reports: $(cat "$work/balance_check.err")"
expect_rc nonzero balance_missing -- "$bin" trace "$work/nope" --balance 2
expect_text balance_missing err "nope"
expect_rc nonzero trace_json_bad_format -- "$bin" trace --format xml "$work/job"
expect_rc nonzero trace_missing -- "$bin" trace "$work/nope"
expect_text trace_missing err "nope"

expect_rc 0 job_resume -- "$mpiexec" -n 4 --oversubscribe "$bin" run --resume "$work/job" --set run.versions=6
expect_text job_resume err "resumed at version 4"
case "$(tail -n 1 "$work/job_resume.out")" in
  *'"resumed_from":4'*'"versions":6'* | *'"versions":6'*'"resumed_from":4'*) ;;
  *) fail "job_resume: summary does not say resumed_from 4, versions 6: $(tail -n 1 "$work/job_resume.out")" ;;
esac
# export-hf: the run's newest checkpoint (version 6, found from the run folder) and an early one
# (version 2, named as a file) become Hugging Face folders that transformers loads, with a
# tokenizer that encodes as the task vocabulary (one id per character; test_hf_model compares
# the ids and log-probs in full).
expect_rc 0 export_run -- "$bin" export-hf "$work/job" "$work/hf_v6"
expect_text export_run out '"version": 6'
expect_rc 0 export_v2 -- "$bin" export-hf "$work/job/checkpoints/step_2.solver.h5" "$work/hf_v2"
expect_text export_v2 out '"version": 2'
expect_rc nonzero export_again -- "$bin" export-hf "$work/job" "$work/hf_v6"
expect_text export_again err "already holds a config.json"
"$ASTRAFLOW_PYTHON" - "$work/hf_v2" "$work/hf_v6" >"$work/export_check.out" 2>&1 <<'PY' ||
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
for folder in sys.argv[1:3]:
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = AutoTokenizer.from_pretrained(folder)("12+34=")["input_ids"]
    assert len(ids) == 6, ids
    assert torch.isfinite(model(input_ids=torch.tensor([ids])).logits).all()
PY
  fail "export: transformers could not use the exported folders: $(grep -v "Loading weights" "$work/export_check.out" | tail -n 5)"
# A policy from a Hugging Face folder: init-model makes one, sft, train-local and a distributed
# run train it, export-hf writes the run's result, and transformers loads that with weights that
# moved away from the folder's.
expect_rc 0 init_model -- "$bin" init-model "$work/hf_init" --hidden-size 32 --layers 1 --heads 2 --kv-heads 1 \
  --head-dim 16 --intermediate-size 64 --max-positions 64 --seed 3
expect_text init_model out '"architecture": "Qwen3ForCausalLM"'
cat >"$work/hf.yaml" <<YAML
run: {name: hf, output_dir: $work/hf_run, seed: 1, threads_per_rank: 1, versions: 6, checkpoint_every: 3, export_hf_every: 2}
policies:
  - name: solver
    model: {hf: $work/hf_init, max_seq_len: 32}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: rollout, policies: [solver], ranks: 2}
environment: {name: arithmetic, digits: 1, operators: "+"}
rollout: {group_size: 4, max_new_tokens: 4, batch_tasks: 16}
trainer: {groups_per_step: 4}
sft: {max_steps: 20, checkpoint: $work/hf_sft.h5}
local: {steps: 10}
YAML
expect_rc 0 hf_validate -- "$bin" validate "$work/hf.yaml"
# A policy given as a Hugging Face folder starts from it: scripts and jobs get the folder, never an sft.
expect_rc 0 hf_warm -- "$bin" warm-start-path "$work/hf.yaml"
[ "$(cat "$work/hf_warm.out")" = "$work/hf_init" ] ||
  fail "warm-start-path of an hf policy printed '$(cat "$work/hf_warm.out")', wanted $work/hf_init"
expect_rc 0 hf_sft -- "$bin" sft "$work/hf.yaml"
expect_rc 0 hf_local -- "$bin" train-local "$work/hf.yaml"
expect_rc 0 hf_run -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/hf.yaml"
expect_rc 0 hf_export -- "$bin" export-hf "$work/hf_run" "$work/hf_trained"
expect_text hf_export out '"version": 6'
# run.export_hf_every: 2 wrote versions 2, 4 and 6 as folders while the run went on.
for v in 2 4 6; do
  [ -f "$work/hf_run/hf/solver_step_$v/config.json" ] || fail "export_hf_every: no folder for version $v"
done
[ -z "$(ls -d "$work"/hf_run/hf/*.tmp 2>/dev/null)" ] || fail "export_hf_every: a .tmp folder was left"
"$ASTRAFLOW_PYTHON" - "$work/hf_init" "$work/hf_trained" "$work/hf_run/hf/solver_step_6" >"$work/hf_check.out" 2>&1 <<'PY' ||
import sys
import torch
from transformers import AutoModelForCausalLM
start, trained, during = (AutoModelForCausalLM.from_pretrained(p) for p in sys.argv[1:4])
assert all(torch.equal(a, b) for a, b in zip(trained.parameters(), during.parameters())), "export_hf_every's v6 differs"
assert type(start) is type(trained), (type(start), type(trained))
moved = max((a - b).abs().max().item() for a, b in zip(start.parameters(), trained.parameters()))
assert moved > 0, "the trained weights are the folder's"
assert torch.isfinite(trained(input_ids=torch.tensor([[5, 6, 7]])).logits).all()
PY
  fail "hf training: $(grep -v "Loading weights" "$work/hf_check.out" | tail -n 5)"
# The dataset environment: JSONL rows (two bad lines, counted and named) rendered with the
# folder's chat template and tokenizer, scored by the math reward; sft, then a distributed run whose
# summary says why every training episode got its reward.
mkdir -p "$work/ds"
for i in $(seq 1 30); do echo "{\"prompt\": \"$i+1?\", \"answer\": \"$((i + 1))\", \"level\": $((i % 3))}"; done >"$work/ds/train.jsonl"
printf 'not json\n{"answer": "no prompt"}\n' >>"$work/ds/train.jsonl"
for i in $(seq 40 44); do echo "{\"prompt\": \"$i+1?\", \"answer\": \"$((i + 1))\"}"; done >"$work/ds/eval.jsonl"
sed -e "s#name: hf, output_dir: $work/hf_run#name: ds, output_dir: $work/ds_run#" -e "s#versions: 6, checkpoint_every: 3, export_hf_every: 2#versions: 3#" \
  -e "s#max_seq_len: 32#max_seq_len: 64#" -e "s#checkpoint: $work/hf_sft.h5#checkpoint: $work/ds_sft.h5#" \
  -e "s#^environment: .*#environment: {name: dataset, train: [$work/ds/train.jsonl], eval: [$work/ds/eval.jsonl], system_prompt: Be brief., reward: {kind: math}}#" \
  -e "s#max_new_tokens: 4#max_new_tokens: 8#" "$work/hf.yaml" >"$work/ds.yaml"
echo "eval: {problems: 5, every: 2}" >>"$work/ds.yaml"
# astraflow reward --config scores as the config's environment.reward says (math here).
echo '{"response": "so \\boxed{7}", "reference": "7"}' >"$work/reward_line.jsonl"
expect_rc 0 reward_config -- bash -c '"$1" reward --config "$2" < "$3"' _ "$bin" "$work/ds.yaml" "$work/reward_line.jsonl"
expect_text reward_config out '"reason":"correct"'
expect_rc nonzero reward_config_kind -- "$bin" reward --config "$work/ds.yaml" --kind exact
# Your own verifier (examples/reward_worker.py), three ways: per item, persistent (one process,
# a line per item; restarted every 50 items here) and over http — the same answers for 300
# generated lines, long and odd ones among them.
"$ASTRAFLOW_PYTHON" - "$work/verifier_in.jsonl" <<'PY'
import json, random, sys
rng = random.Random(3)
words = ["the", "answer", "is", '"q"', "back\\slash", "λ", "日本", "\n", "{", "🙂"]
with open(sys.argv[1], "w") as f:
    for i in range(300):
        n = 20000 if i % 97 == 5 else rng.randrange(30)
        r = " ".join(rng.choice(words) for _ in range(n)) + (" %d" % rng.randrange(9) if rng.random() < 0.8 else "")
        f.write(json.dumps({"response": r, "reference": str(rng.randrange(9))}) + "\n")
PY
head -n 40 "$work/verifier_in.jsonl" >"$work/verifier_in40.jsonl"
expect_rc 0 verifier_item -- bash -c '"$1" reward --kind command --command "python3 $2" < "$3"' _ "$bin" \
  "$src/examples/reward_worker.py" "$work/verifier_in40.jsonl"
expect_rc 0 verifier_persistent -- bash -c '"$1" reward --kind command --persistent --max-items 50 \
  --command "python3 $2" < "$3"' _ "$bin" "$src/examples/reward_worker.py" "$work/verifier_in.jsonl"
expect_text verifier_persistent err "300 items; 6 workers started (5 restarts), 0 crashed"
head -n 40 "$work/verifier_persistent.out" | cmp -s - "$work/verifier_item.out" ||
  fail "persistent verifier: answers differ from the per-item command's"
port=$("$ASTRAFLOW_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$src/examples/reward_worker.py" --http "$port" &
verifier_pid=$!
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
expect_rc 0 verifier_http -- bash -c '"$1" reward --kind http --url "http://127.0.0.1:$2/reward" < "$3"' _ "$bin" \
  "$port" "$work/verifier_in.jsonl"
kill "$verifier_pid"
cmp -s "$work/verifier_http.out" "$work/verifier_persistent.out" || fail "http verifier: answers differ"
grep -q '"reason":"correct"' "$work/verifier_http.out" && grep -q '"reason":"wrong"' "$work/verifier_http.out" ||
  fail "verifier: no correct and wrong answers among 300"
expect_rc 0 ds_sft -- "$bin" sft "$work/ds.yaml"
expect_text ds_sft err "2 of 32 lines skipped"
expect_text ds_sft err "train.jsonl:31: not valid JSON"
# The run scores with the persistent verifier, a worker per rollout rank.
# and its episodes may call the tools of the calculator MCP server (examples/mcp_calculator, the
# `mcp` SDK's): multi-turn, the schemas in the prompt, a server per rollout rank.
sed "s#reward: {kind: math}#reward: {kind: command, persistent: true, command: [python3, $src/examples/reward_worker.py]}, tools: {mcp: [{name: calculator, command: [$ASTRAFLOW_PYTHON, $src/examples/mcp_calculator/server.py]}]}#" \
  "$work/ds.yaml" >"$work/ds_worker.yaml"
expect_rc 0 ds_run -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/ds_worker.yaml"
cat "$work/ds_run.out" "$work/ds_run.err" | grep -q "MCP server 'calculator': 3 tools (add, multiply, divide)" ||
  fail "ds run: no rollout rank listed the calculator's tools"
# astraflow env check: the same config's environment, tools and verifier, played by a script.
expect_rc 0 env_check -- "$bin" env check "$work/ds_worker.yaml" --episodes 2
expect_text env_check out "MCP server 'calculator': 3 tools"
expect_text env_check out '"name":"add","description":"Adds two numbers."'
expect_text env_check out '{"name":"multiply","arguments":{"a":1,"b":1}}'
expect_text env_check out "--- policy (scripted) ---" 8
expect_text env_check out "--- environment ---" 6
expect_text env_check out "2 episodes: 2 no_answer; tool calls 6 (0 errors, 0 timed out, 0 servers restarted); verifier processes started 1"
sed "s#command: \[$ASTRAFLOW_PYTHON, #command: [/no/such/python, #" "$work/ds_worker.yaml" >"$work/ds_noserver.yaml"
expect_rc nonzero env_check_noserver -- "$bin" env check "$work/ds_noserver.yaml"
expect_text env_check_noserver err "MCP server 'calculator': cannot run /no/such/python"
"$ASTRAFLOW_PYTHON" - "$work/ds_run/summary.json" >"$work/ds_check.out" 2>&1 <<'PY' ||
import json, sys
s = json.load(open(sys.argv[1]))
reasons = s["reward_reasons"]
assert sum(reasons.values()) == s["produced"] > 0, (reasons, s["produced"])
assert reasons["unstated"] == 0 and reasons["correct"] + reasons["wrong"] + reasons["no_answer"] > 0, reasons
assert s["eval_accuracy_end"] is not None, s
rollout = [r for r in s["ranks"] if r["role"] == "rollout"]
# one worker per rollout rank that scored (a rank may have taken no task), never restarted
assert sum(r["verifier_started"] for r in rollout) >= 1, rollout
assert all(r["verifier_started"] <= 1 and r["verifier_restarts"] == 0 for r in rollout), rollout
assert all(r["mcp_restarts"] == 0 and r["mcp_timeouts"] == 0 for r in rollout), rollout
PY
  fail "dataset run: $(tail -n 5 "$work/ds_check.out")"
# Its export carries the tokenizer it was trained with: the folder's own, chat template included.
expect_rc 0 ds_export -- "$bin" export-hf "$work/ds_run" "$work/ds_export"
cmp -s "$work/hf_init/tokenizer.json" "$work/ds_export/tokenizer.json" || fail "ds export: not the folder's tokenizer.json"
grep -q chat_template "$work/ds_export/tokenizer_config.json" || fail "ds export: no chat template"
# The Solver + Test-Case Generator workflow on real code, as configs/code_solver_testgen.yaml
# ships (its relative paths resolved in $work): five ranks, two trainers, chat transcripts,
# generated tests and hidden tests run in the sandbox; every trajectory's reward has a reason.
"$ASTRAFLOW_PYTHON" "$src/scripts/make_code_problems.py" --out "$work/runs/code/data" --train 6 --eval 2 ||
  fail "make_code_problems.py"
expect_rc 0 code_run -- bash -c 'cd "$1" && "$2" -n 5 --oversubscribe "$3" run "$4" --set run.versions=2 \
  --set rollout.max_new_tokens=16 --set eval.problems=2 --set run.threads_per_rank=1' _ "$work" "$mpiexec" "$bin" \
  "$src/configs/code_solver_testgen.yaml"
"$ASTRAFLOW_PYTHON" - "$work/runs/code_solver_testgen/summary.json" >"$work/code_check.out" 2>&1 <<'PY' ||
import json, sys
s = json.load(open(sys.argv[1]))
reasons = s["reward_reasons"]
assert s["produced"] > 0 and s["produced"] % 2 == 0, s["produced"]  # one trajectory per role
assert sum(reasons.values()) == s["produced"], (reasons, s["produced"])
assert reasons["unstated"] == 0, reasons
assert s["eval_accuracy_end"] is not None, s
PY
  fail "code workflow run: $(tail -n 5 "$work/code_check.out")"
expect_rc nonzero resume_bad_override -- "$mpiexec" -n 4 --oversubscribe "$bin" run --resume "$work/job" --set run.versions=zero
expect_text resume_bad_override err "run.versions" 1
# A truncated checkpoint: refused, naming the file.
head -c 2000 "$work/job/checkpoints/step_6.solver.h5" >"$work/cut.h5"
mv "$work/cut.h5" "$work/job/checkpoints/step_6.solver.h5"
expect_rc nonzero resume_truncated -- "$mpiexec" -n 4 --oversubscribe "$bin" run --resume "$work/job" --set run.versions=8
expect_text resume_truncated err "step_6.solver.h5"
expect_rc nonzero resume_nothing -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/job.yaml" --resume "$work/nothing_here" \
  --set run.versions=8
expect_text resume_nothing err "no complete checkpoint" 1

# One run per folder. A fresh run into the used job folder is refused before anything is written:
# the folder is as it was, byte for byte.
rm -f "$work/job/checkpoints/step_6."*  # the truncated checkpoint above: v4 is the run's newest now
snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
snapshot "$work/job" >"$work/job_before.sums"
expect_rc nonzero run_used_folder -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/job.yaml"
expect_text run_used_folder err "already holds a run" 1
expect_text run_used_folder err "--resume $work/job" 1
expect_text run_used_folder err "--overwrite" 1
snapshot "$work/job" >"$work/job_after.sums"
cmp -s "$work/job_before.sums" "$work/job_after.sums" || fail "run_used_folder: the refused run changed $work/job"
grep -q '^# astraflow run_id: ' "$work/job/config.yaml" || fail "config.yaml does not start with the run id"
# A folder holding only a warm start (sft.h5) is no run: a fresh run starts there. That run's
# newer checkpoints (v8), copied into the job folder, are another run's: --resume passes over
# them, says so, and takes the job run's own v4.
mkdir -p "$work/job_b"
cp "$work/job/checkpoints/step_2.solver.h5" "$work/job_b/sft.h5"  # a warm start of this model
sed -e "s|output_dir: $work/job|output_dir: $work/job_b|" -e 's|versions: 4|versions: 8|' "$work/job.yaml" >"$work/job_b.yaml"
expect_rc 0 run_beside_sft -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/job_b.yaml"
expect_text run_beside_sft err "warm start of solver from $work/job_b/sft.h5"
cp "$work/job_b/checkpoints/step_8."* "$work/job/checkpoints/"
expect_rc 0 resume_own_run -- "$mpiexec" -n 4 --oversubscribe "$bin" run --resume "$work/job" --set run.versions=6
expect_text resume_own_run err "passed over newer checkpoints of another run: step_8" 1
case "$(tail -n 1 "$work/resume_own_run.out")" in
  *'"resumed_from":4'*) ;;
  *) fail "resume_own_run: did not resume from the run's own v4: $(tail -n 1 "$work/resume_own_run.out")" ;;
esac
# --overwrite starts over: the other run's checkpoints go, the warm start stays.
expect_rc 0 run_overwrite -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/job_b.yaml" --overwrite --set run.versions=2
[ -f "$work/job_b/sft.h5" ] || fail "run_overwrite: removed sft.h5"
[ -f "$work/job_b/checkpoints/step_8.h5" ] && fail "run_overwrite: kept the earlier run's step_8"
[ -f "$work/job_b/checkpoints/step_2.h5" ] || fail "run_overwrite: no step_2 of its own"
expect_rc nonzero run_overwrite_resume -- "$bin" run --resume "$work/job_b" --overwrite

# Trajectories larger than the trajectory ring: refused and counted, the run ends (no hang).
sed -e "s|output_dir: $work/job|output_dir: $work/small_ring|" -e 's|versions: 4|versions: 2, max_wall_seconds: 4|' \
  "$work/job.yaml" >"$work/small_ring.yaml"
printf 'dataflow: {trajectory_ring: {slots: 3, slot_bytes: 64}}\n' >>"$work/small_ring.yaml"
expect_rc 0 small_ring -- "$mpiexec" -n 4 --oversubscribe "$bin" run "$work/small_ring.yaml"
expect_text small_ring err "more than dataflow.trajectory_ring holds"
case "$(tail -n 1 "$work/small_ring.out")" in
  *'"filtered_error":0,'*) fail "small_ring: no trajectory counted as refused" ;;
  *'"filtered_error":'*) ;;
  *) fail "small_ring: no summary line" ;;
esac

# A rank that dies: the job stops, and the message names the rank and its role.
sed -e "s|output_dir: $work/job|output_dir: $work/dies|" -e 's|versions: 4|versions: 100000|' "$work/job.yaml" >"$work/dies.yaml"
"$mpiexec" -n 4 --oversubscribe "$bin" run "$work/dies.yaml" >"$work/dies.out" 2>"$work/dies.err" &
job=$!
victim=""
for _ in $(seq 1 300); do
  # The rank-3 process, once the run has started (its per-rank trace exists).
  if [ -f "$work/dies/trace/rank_3.h5" ]; then
    for p in $(pgrep -f "$bin run $work/dies.yaml" || true); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=3'; then victim=$p; fi
    done
  fi
  [ -n "$victim" ] && break
  sleep 0.2
done
if [ -z "$victim" ]; then
  fail "dies: could not find rank 3"
  kill "$job" 2>/dev/null || true
else
  sleep 1
  kill -9 "$victim"
  rc=0
  timeout 60 tail --pid="$job" -f /dev/null || fail "dies: the job did not stop within 60 s of losing a rank"
  wait "$job" || rc=$?
  [ "$rc" -ne 0 ] || fail "dies: exit 0 after a rank was killed"
  expect_text dies err "rank 3 (rollout:pool2"
fi

# sft and train-local end with exactly one JSON line on stdout (tiny sizes: seconds).
cat >"$work/tiny.yaml" <<YAML
run: {name: tiny, output_dir: $work/tiny, threads_per_rank: 1}
policies:
  - name: solver
    model: {d_model: 16, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 32, max_seq_len: 24}
layout: [{role: dataflow}, {role: trainer, policy: solver}, {role: rollout, policies: [solver]}]
rollout: {group_size: 2, max_new_tokens: 4}
trainer: {groups_per_step: 2}
sft: {max_steps: 3, batch_size: 4, eval_every: 3, target_accuracy: 1.0}
eval: {problems: 4, every: 1}
local: {steps: 2}
YAML
for cmd in sft train-local; do
  expect_rc 0 "local_$cmd" -- "$bin" $cmd "$work/tiny.yaml"
  lines=$(wc -l <"$work/local_$cmd.out")
  [ "$lines" -eq 1 ] || fail "$cmd printed $lines lines on stdout, wanted one JSON line"
  for key in eval_accuracy_start eval_accuracy_end steps wall_seconds; do
    expect_text "local_$cmd" out "\"$key\":"
  done
done
expect_text local_train-local out '"steps":2'
[ -f "$work/tiny/sft.h5" ] || fail "sft wrote no checkpoint"
# A checkpoint made for another model size is refused, naming a tensor.
sed 's/ffn_hidden: 32/ffn_hidden: 48/' "$work/tiny.yaml" >"$work/tiny_big.yaml"
expect_rc nonzero local_mismatch -- "$bin" train-local "$work/tiny_big.yaml"
expect_text local_mismatch err "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [32,16]"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
