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
expect_rc 0 layout_size -- "$bin" layout-size "$quick"
[ "$(cat "$work/layout_size.out")" = 4 ] || fail "layout-size printed '$(cat "$work/layout_size.out")', wanted 4"

sed 's/^dataflow:/dataflw:/' "$quick" >"$work/unknown_key.yaml"
expect_rc nonzero validate_unknown -- "$bin" validate "$work/unknown_key.yaml"
expect_text validate_unknown err "dataflw: unknown key" 1
printf 'run: {name: x\npolicies: [' >"$work/malformed.yaml"
expect_rc nonzero validate_malformed -- "$bin" validate "$work/malformed.yaml"
expect_text validate_malformed err "malformed YAML" 1
expect_rc nonzero validate_missing -- "$bin" validate "$work/nope.yaml"
expect_text validate_missing err "nope.yaml: cannot open the config file" 1

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

# The quickstart job itself, under both one-sided components.
for osc in sm ucx; do
  rm -rf "$work/run"
  expect_rc 0 "run_$osc" -- "$mpiexec" -n 4 --oversubscribe --mca osc $osc "$bin" run "$work/quick.yaml" --log-level info
  expect_text "run_$osc" err "role map (4 ranks)" 1
  expect_text "run_$osc" err "pool pool2: 2 rollout ranks up" 1
  expect_text "run_$osc" err "all 4 ranks up" 1
  [ -f "$work/run/trace.h5" ] || { fail "run_$osc: no trace.h5"; continue; }
  "$h5dump" -d /events "$work/run/trace.h5" >"$work/dump_$osc.out" 2>&1 || fail "h5dump could not read trace.h5"
  # One startup event per rank and a handshake from each rank's rings.
  expect_text "dump_$osc" out '"startup' 4
  n=$(grep -cF '"handshake' "$work/dump_$osc.out")
  [ "$n" -ge 4 ] || fail "run_$osc: $n handshake events in trace.h5, wanted >= 4"
done

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
expect_text local_mismatch err "tensor 'layers.0.mlp.gate' has shape [32,16]"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
