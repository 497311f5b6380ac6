#!/usr/bin/env bash
# `astraflow serve` end to end: two random Qwen3-shaped folders from init-model, the server on a
# free port with small limits, then tests/serve/serve_check.py with the official openai client and
# transformers as the reference, then tests/serve/serve_soak.py (hostile clients for a bounded
# time); SIGTERM must stop the server cleanly with its statistics line.
#   test_serve.sh <astraflow binary> <source dir> <python>
set -euo pipefail
bin=$1 src=$2 python=$3
work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" init-model "$work/model" --preset tiny-qwen3 --seed 3 >/dev/null
"$bin" init-model "$work/other" --preset tiny-qwen3 --seed 4 >/dev/null
"$bin" serve "$work/model" --port 0 --port-file "$work/port" --max-batch 8 --served-model-name tiny \
  --max-body-bytes 1048576 --max-json-depth 32 --max-request-tokens 4096 --read-timeout 2 --idle-timeout 2 \
  >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  [ -s "$work/port" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; echo "FAIL: the server exited"; exit 1; }
  sleep 0.1
done
[ -s "$work/port" ] || { echo "FAIL: no port after 30 s"; exit 1; }
port=$(cat "$work/port")

"$python" "$src/tests/serve/serve_check.py" "$port" "$work/model" "$work/other"
"$python" "$src/tests/serve/serve_soak.py" "$port" "$server" "${ASTRAFLOW_SOAK_SECONDS:-20}"

kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=
[ $rc -eq 0 ] || { cat "$work/serve.log"; echo "FAIL: the server exited $rc on SIGTERM"; exit 1; }
grep -q "weight updates" "$work/serve.log" || { cat "$work/serve.log"; echo "FAIL: no statistics line"; exit 1; }
grep -q "refused" "$work/serve.log" || { cat "$work/serve.log"; echo "FAIL: the statistics line counts no refusals"; exit 1; }
grep "stopped on signal" "$work/serve.log"
echo "PASS"
