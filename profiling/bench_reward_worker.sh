#!/usr/bin/env bash
# What a Python verifier costs per item, run three ways through `astraflow reward` with the same
# program (examples/reward_worker.py) and the same generated inputs, side by side in one run:
# per item (kind command: a process per response), persistent (one process, a line per item) and
# http (the program serving POSTs; one keep-alive connection). Prints one JSON line per way
# (items, seconds, milliseconds per item) and the ratios per item.
#   profiling/bench_reward_worker.sh [ITEMS] [PER_ITEM_ITEMS]
# ITEMS (default 10000) go through persistent and http; per item takes the first PER_ITEM_ITEMS
# (default 1000: at ~50-90 ms an item, 10,000 would take ~10 minutes; its cost per item does not
# depend on how many) — the answers of the shared prefix are compared, and must be equal.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-10000}
per_item=${2:-1000}
py=.venv/bin/python
[ -x "$py" ] || py=python3
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
"$py" - "$work/in.jsonl" "$items" <<'PY'
import json, random, sys
rng = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        words = " ".join(rng.choice(["so", "the", "answer", "is", "x"]) for _ in range(rng.randrange(60)))
        f.write(json.dumps({"response": f"{words} {rng.randrange(20)}", "reference": str(rng.randrange(20)),
                            "prompt": "What is it?", "metadata": {"id": i}}) + "\n")
PY
head -n "$per_item" "$work/in.jsonl" >"$work/in_item.jsonl"
timed() {  # timed NAME N -- command...: runs it, prints its JSON line, leaves its seconds in $seconds
  local name=$1 n=$2; shift 3
  local start end
  start=$(date +%s.%N)
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  end=$(date +%s.%N)
  seconds=$(echo "$end - $start" | bc -l)
  printf '{"way": "%s", "items": %d, "seconds": %.2f, "ms_per_item": %.3f}\n' "$name" "$n" "$seconds" \
    "$(echo "1000 * $seconds / $n" | bc -l)"
}
cli=build/bin/astraflow
timed per_item "$per_item" -- bash -c "$cli reward --kind command --command 'python3 examples/reward_worker.py' < $work/in_item.jsonl"
item_ms=$(echo "1000 * $seconds / $per_item" | bc -l)
timed persistent "$items" -- bash -c "$cli reward --kind command --persistent --command 'python3 examples/reward_worker.py' < $work/in.jsonl"
persistent_ms=$(echo "1000 * $seconds / $items" | bc -l)
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 examples/reward_worker.py --http "$port" &
server=$!
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
timed http "$items" -- bash -c "$cli reward --kind http --url http://127.0.0.1:$port/reward < $work/in.jsonl"
http_ms=$(echo "1000 * $seconds / $items" | bc -l)
head -n "$per_item" "$work/persistent.out" | cmp -s - "$work/per_item.out" || { echo "answers differ: per item vs persistent"; exit 1; }
cmp -s "$work/persistent.out" "$work/http.out" || { echo "answers differ: persistent vs http"; exit 1; }
printf '{"per_item_over_persistent": %.1f, "per_item_over_http": %.1f, "answers_equal": true}\n' \
  "$(echo "$item_ms / $persistent_ms" | bc -l)" "$(echo "$item_ms / $http_ms" | bc -l)"
