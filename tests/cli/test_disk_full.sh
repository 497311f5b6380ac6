#!/usr/bin/env bash
# A run whose checkpoint folder is full goes to its end: every checkpoint the trainer and the
# dataflow rank cannot fit is skipped with a warning and counted (checkpoints_skipped), no
# part-written file is left, and the summary is written. The checkpoint folder is a 256 KiB tmpfs
# (mounting needs root; the test is skipped, exit 77, where it cannot mount).
#   test_disk_full.sh <astraflow binary> <source dir> <mpiexec> <python> <ranks: 3|4>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 python=$4 ranks=$5
work=$(mktemp -d)
mkdir -p "$work/run/checkpoints"
if ! mount -t tmpfs -o size=256k tmpfs "$work/run/checkpoints" 2>/dev/null; then
  rm -rf "$work"
  echo "SKIP: cannot mount a tmpfs here (needs root)"
  exit 77
fi
trap 'umount "$work/run/checkpoints"; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$mpiexec" -n "$ranks" --oversubscribe "$bin" run "$src/configs/quickstart.yaml" \
  --set run.output_dir="$work/run" --set sft.checkpoint="$work/none.h5" --set run.versions=6 \
  --set run.checkpoint_every=2 --set run.max_wall_seconds=120 --set eval.problems=0 \
  --set "layout.2.ranks=$((ranks - 2))" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 0 ] || fail "the run ended with $rc: $(tail -5 "$work/err")"
grep -q "checkpoint v2 of solver skipped" "$work/err" || fail "no warning for the trainer's skipped checkpoint"
grep -q "checkpoint v2 skipped" "$work/err" || fail "no warning for the dataflow rank's skipped checkpoint"
[ -z "$(ls -A "$work/run/checkpoints")" ] || fail "files left in the full folder: $(ls "$work/run/checkpoints")"
"$python" - "$work/run/summary.json" <<'PY' || fail "summary"
import json, sys
s = json.load(open(sys.argv[1]))
by_role = {r["role"]: r for r in s["ranks"]}
# checkpoints at v2, v4, v6 and the final one (v6 again is not repeated): at least three each
assert by_role["trainer"]["checkpoints_skipped"] >= 3, by_role["trainer"]
assert by_role["dataflow"]["checkpoints_skipped"] >= 3, by_role["dataflow"]
PY
[ $failures -eq 0 ] && echo "PASS: disk_full at $ranks ranks"
exit $((failures > 0))
