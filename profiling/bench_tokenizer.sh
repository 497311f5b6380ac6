#!/usr/bin/env bash
# Tokenizer throughput, astraflow vs the `tokenizers` library, one thread each, on the same
# strings: the generated mix of tests/text/tokenizer_reference.py (prose, code, numbers, CJK and
# other scripts, emoji, whitespace runs), N strings (default 20000), encoded without the
# post-processor's special tokens on both sides. Each side encodes every string once to warm up,
# then three times; the best time counts. Prints MB/s for both and the ratio, for Qwen3's
# tokenizer.json and the Llama-3-style one (hand-written splits), the GPT-4o- and
# DeepSeek-V3-style ones (Oniguruma splits), the Llama-2-style one (no pre-tokenizer, byte
# fallback), and Qwen3's file with its Split sent to Oniguruma (behaviour Removed + invert,
# which keeps the same pieces): what the hand-written split saves.
#   profiling/bench_tokenizer.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
py=.venv/bin/python
ref=tests/text/tokenizer_reference.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$ref" files "$dir" > /dev/null
"$py" "$ref" strings "$n" 11 "$dir/strings.jsonl"
mkdir -p "$dir/qwen3_onig"
"$py" - "$dir/qwen3/tokenizer.json" "$dir/qwen3_onig/tokenizer.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
for p in j["pre_tokenizer"]["pretokenizers"]:
    if p["type"] == "Split":
        p["behavior"], p["invert"] = "Removed", True
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
for name in qwen3 llama3 gpt4o deepseek3 llama2 qwen3_onig; do
  ours=$(build/bin/bench_tokenizer "$dir/$name" "$dir/strings.jsonl")
  theirs=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$py" - "$dir/$name/tokenizer.json" "$dir/strings.jsonl" <<'PY'
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
texts = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
size = sum(len(t.encode("utf-8")) for t in texts)
tokens = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
best = 1e30
for _ in range(3):
    start = time.perf_counter()
    for t in texts:
        tok.encode(t, add_special_tokens=False)
    best = min(best, time.perf_counter() - start)
print(json.dumps({"bytes": size, "tokens": tokens, "seconds": round(best, 4), "mb_per_s": round(size / best / 1e6, 2)}))
PY
)
  echo "$name astraflow: $ours"
  echo "$name tokenizers: $theirs"
  "$py" -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); assert a['tokens']==b['tokens'], 'token counts differ'; print('$name ratio astraflow/tokenizers: %.2fx' % (a['mb_per_s']/b['mb_per_s']))" "$ours" "$theirs"
done
