"""Checks `astraflow serve` with the official `openai` client and transformers as the reference
(tests/serve/test_serve.sh starts the server and calls this).

    serve_check.py PORT FOLDER OTHER_FOLDER

FOLDER is the model the server loaded; OTHER_FOLDER a second model of the same shape for the
weight-update check. Every log-prob the server reports is compared with transformers' own
forward pass of the same folder at the request's temperature; the responses must parse in the
client's own types. Prints one JSON line of figures; exits 1 on the first failed check.
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import torch
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from transformers import AutoModelForCausalLM, AutoTokenizer

PORT, FOLDER, OTHER = int(sys.argv[1]), sys.argv[2], sys.argv[3]
BASE = f"http://127.0.0.1:{PORT}"
TOL = 2e-4  # float32 on both sides; the server batches rows of other lengths beside each one
figures = {}


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def raw(method, path, body=None, data=None):
    """(status, parsed JSON or text) of one request with urllib, for what the client would not send."""
    if data is None and body is not None:
        data = json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


class Reference:
    def __init__(self, folder):
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        self.model.eval()
        # An astraflow policy never draws <pad>, <bos> or ids past the tokenizer (the server's default).
        tok = AutoTokenizer.from_pretrained(folder)
        never = [i for i in (tok.pad_token_id, tok.bos_token_id) if i is not None]
        self.never = never + list(range(len(tok), self.model.config.vocab_size))

    def logprobs(self, prompt, generated, temperature, banned=()):
        """log pi(generated[i] | prompt + generated[:i]) at the temperature, `banned` ids never drawn."""
        ids = torch.tensor([prompt + generated])
        with torch.no_grad():
            logits = self.model(ids).logits[0].float() / temperature
        logits[:, self.never + list(banned)] = float("-inf")
        lp = torch.log_softmax(logits, -1)
        return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(generated)]


def max_delta(a, b):
    check(len(a) == len(b), f"{len(a)} log-probs against {len(b)}")
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


ref = Reference(FOLDER)
tok = AutoTokenizer.from_pretrained(FOLDER)
client = openai.OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0, timeout=120)
name = client.models.list().data[0].id
figures["model"] = name

# Completions from token ids, with logprobs and vLLM's token-id rendering: every behaviour log-prob
# equals transformers' at the request's temperature.
prompt_ids = tok.encode("The quick brown fox")
c = client.completions.create(model=name, prompt=prompt_ids, max_tokens=12, temperature=0.8, logprobs=1,
                              extra_body={"return_tokens_as_token_ids": True, "ignore_eos": True})
check(isinstance(c, Completion) and c.object == "text_completion", "a Completion object")
choice = c.choices[0]
ids = [int(t.split(":")[1]) for t in choice.logprobs.tokens]
check(len(ids) == 12 and choice.finish_reason == "length", f"12 tokens ending on length, got {len(ids)} {choice.finish_reason}")
d = max_delta(choice.logprobs.token_logprobs, ref.logprobs(prompt_ids, ids, 0.8))
figures["completion_max_abs_dlogprob"] = d
check(d < TOL, f"completion log-probs differ from transformers by {d}")
check(c.usage.prompt_tokens == len(prompt_ids) and c.usage.completion_tokens == 12, "usage counts")
check(choice.text == tok.decode(ids, skip_special_tokens=True), "text is the tokenizer's decoding of the ids")

# logit_bias of -100 bans a token (the OpenAI API's documented ban): the greedy first token,
# banned, gives way to the next best, whose log-prob is transformers' with it masked too.
first = client.completions.create(model=name, prompt=prompt_ids, max_tokens=1, temperature=0, logprobs=1,
                                  extra_body={"return_tokens_as_token_ids": True}).choices[0]
t0 = int(first.logprobs.tokens[0].split(":")[1])
second = client.completions.create(model=name, prompt=prompt_ids, max_tokens=1, temperature=0, logprobs=1,
                                   logit_bias={str(t0): -100},
                                   extra_body={"return_tokens_as_token_ids": True}).choices[0]
t1 = int(second.logprobs.tokens[0].split(":")[1])
check(t1 != t0, f"the banned token {t0} was drawn")
d = max_delta(second.logprobs.token_logprobs, ref.logprobs(prompt_ids, [t1], 1.0, banned=[t0]))
check(d < TOL, f"log-prob with a ban differs by {d}")
try:
    client.completions.create(model=name, prompt=prompt_ids, max_tokens=1, logit_bias={str(t0): -5})
    check(False, "a bias that is not a ban is refused")
except openai.BadRequestError as e:
    check(e.body.get("param") == "logit_bias", f"400 body {e.body}")

# n samples of a text prompt, greedy: all equal, each its own index.
c = client.completions.create(model=name, prompt="Hello", max_tokens=6, temperature=0, n=3)
check([x.index for x in c.choices] == [0, 1, 2] and len({x.text for x in c.choices}) == 1, "n=3 greedy choices")

# Stop strings: the text ends before the first match, finish_reason stop.
full = client.completions.create(model=name, prompt="Once upon", max_tokens=40, temperature=0,
                                 extra_body={"ignore_eos": True}).choices[0].text
# A stop string whose first match is not at the start, where the text allows one.
stop = next((full[i:i + 2] for i in range(1, len(full) - 1)
             if full.index(full[i:i + 2]) == i and full[i:i + 2].isascii() and full[i:i + 2].isprintable()),
            full[:2])
check(stop and stop.isprintable(), f"a printable stop string in the greedy text {full!r}")
cut = client.completions.create(model=name, prompt="Once upon", max_tokens=40, temperature=0, stop=[stop],
                                extra_body={"ignore_eos": True}).choices[0]
check(cut.text == full[: full.index(stop)] and cut.finish_reason == "stop", f"stop {stop!r}: {cut.text!r} from {full!r}")
figures["stop_cut_at"] = full.index(stop)

# Streamed completion: the pieces add up to the whole answer; usage comes last.
pieces, usage = [], None
for chunk in client.completions.create(model=name, prompt="Once upon", max_tokens=40, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True}):
    check(isinstance(chunk, Completion), "stream chunks are Completion objects")
    pieces += [x.text for x in chunk.choices]
    usage = chunk.usage or usage
check("".join(pieces) == full, f"streamed {''.join(pieces)!r} != {full!r}")
check(usage is not None and usage.completion_tokens == 40, "streamed usage")

# Chat: the prompt is the chat template as transformers renders it; logprobs per token match.
messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}]
chat_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
if isinstance(chat_ids, dict) or hasattr(chat_ids, "input_ids"):
    chat_ids = chat_ids["input_ids"]
r = client.chat.completions.create(model=name, messages=messages, max_tokens=10, temperature=1.0, logprobs=True,
                                   extra_body={"return_tokens_as_token_ids": True, "ignore_eos": True})
check(isinstance(r, ChatCompletion) and r.choices[0].message.role == "assistant", "a ChatCompletion")
check(r.usage.prompt_tokens == len(chat_ids), f"chat prompt {r.usage.prompt_tokens} tokens, transformers {len(chat_ids)}")
gen = [int(x.token.split(":")[1]) for x in r.choices[0].logprobs.content]
d = max_delta([x.logprob for x in r.choices[0].logprobs.content], ref.logprobs(list(chat_ids), gen, 1.0))
figures["chat_max_abs_dlogprob"] = d
check(d < TOL, f"chat log-probs differ by {d}")

# Streamed chat (greedy) equals the unstreamed answer; the first delta carries the role.
whole = client.chat.completions.create(model=name, messages=messages, max_tokens=24, temperature=0,
                                       extra_body={"ignore_eos": True}).choices[0].message.content
deltas, roles, finish = [], [], None
for chunk in client.chat.completions.create(model=name, messages=messages, max_tokens=24, temperature=0, stream=True,
                                            extra_body={"ignore_eos": True}):
    check(isinstance(chunk, ChatCompletionChunk) and chunk.object == "chat.completion.chunk", "chunk type")
    for ch in chunk.choices:
        roles += [ch.delta.role] if ch.delta.role else []
        deltas += [ch.delta.content or ""]
        finish = ch.finish_reason or finish
check("".join(deltas) == whole and roles == ["assistant"] and finish == "length", "streamed chat")

# Errors the API documents: unknown model 404, out-of-range value 400, both as the client's types.
try:
    client.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    check(False, "an unknown model is refused")
except openai.NotFoundError as e:
    check(e.body.get("code") == "model_not_found", f"404 body {e.body}")
try:
    client.completions.create(model=name, prompt="x", max_tokens=1, temperature=7)
    check(False, "temperature 7 is refused")
except openai.BadRequestError as e:
    check(e.body.get("param") == "temperature", f"400 body {e.body}")
status, body = raw("POST", "/v1/completions", data=b"{not json")
check(status == 400 and body["error"]["type"] == "invalid_request_error", f"malformed JSON: {status} {body}")
status, body = raw("POST", "/v1/completions", {"model": name, "prompt": [1, 2], "max_tokens": 1, "bogus": 1})
check(status == 400 and body["error"]["param"] == "bogus", f"unknown field: {status} {body}")
status, body = raw("POST", "/v1/completions", {"model": name, "prompt": [10**6], "max_tokens": 1})
check(status == 400, f"out-of-vocabulary id: {status}")
status, _ = raw("GET", "/v1/completions")
check(status == 405, f"GET on a POST route: {status}")
status, _ = raw("GET", "/no/such/route")
check(status == 404, f"unknown route: {status}")

# SGLang /generate: output_token_logprobs are [logprob, id, null]; meta_info carries the version.
status, g = raw("POST", "/generate", {"input_ids": prompt_ids, "return_logprob": True,
                                     "sampling_params": {"temperature": 0.7, "max_new_tokens": 9, "ignore_eos": True}})
check(status == 200, f"/generate {status} {g}")
meta = g["meta_info"]
gen = [x[1] for x in meta["output_token_logprobs"]]
check(gen == g["output_ids"] and meta["finish_reason"] == {"type": "length", "length": 9}, f"/generate meta {meta}")
d = max_delta([x[0] for x in meta["output_token_logprobs"]], ref.logprobs(prompt_ids, gen, 0.7))
figures["generate_max_abs_dlogprob"] = d
check(d < TOL, f"/generate log-probs differ by {d}")
status, batch = raw("POST", "/generate", {"text": ["a", "bc"], "sampling_params": {"max_new_tokens": 3}})
check(status == 200 and isinstance(batch, list) and len(batch) == 2, "a /generate batch")
status, body = raw("POST", "/generate", {"input_ids": [1], "sampling_params": {"top_k": 5}})
check(status == 400 and "top_k" in body["error"]["message"], "an unsupported sampling value is refused")

# Concurrent requests are all answered (the server batches them).
errors = []


def one(i):
    try:
        client.completions.create(model=name, prompt=[5 + i, 6, 7], max_tokens=8, temperature=1.0)
    except Exception as e:  # noqa: BLE001 - collected and reported
        errors.append(repr(e))


threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
check(not errors, f"concurrent requests failed: {errors[:2]}")

# Requests join the running ones at every step: short greedy requests sent while a long one runs
# are answered while it still runs, each exactly as it is answered alone (ids equal, log-probs
# equal to transformers').
alone = {}
for k in range(3):
    ids = [7 + k, 8, 9, 10 + k]
    status, g = raw("POST", "/generate", {"input_ids": ids, "return_logprob": True,
                                         "sampling_params": {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}})
    check(status == 200, f"alone {status} {g}")
    alone[k] = (ids, g)
long_done = {}
long_req = threading.Thread(target=lambda: long_done.update(g=raw("POST", "/generate", {
    "input_ids": prompt_ids, "sampling_params": {"max_new_tokens": 1800, "ignore_eos": True}})[1], t=time.time()))
long_req.start()
time.sleep(0.2)
joined = {}
for k, (ids, _) in alone.items():
    status, g = raw("POST", "/generate", {"input_ids": ids, "return_logprob": True,
                                         "sampling_params": {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}})
    joined[k] = (g, time.time())
long_req.join()
worst = 0.0
for k, (ids, a) in alone.items():
    g, t = joined[k]
    check(g["output_ids"] == a["output_ids"], f"request {k} joined mid-run: {g['output_ids']} alone: {a['output_ids']}")
    check(t < long_done["t"], f"request {k} waited for the long one to end")
    lps = [x[0] for x in g["meta_info"]["output_token_logprobs"]]
    worst = max(worst, max_delta(lps, [x[0] for x in a["meta_info"]["output_token_logprobs"]]),
                max_delta(lps, ref.logprobs(ids, g["output_ids"], 1.0)))
figures["joined_max_abs_dlogprob"] = worst
check(worst < TOL, f"requests joined mid-run differ by {worst}")
check(long_done["g"]["meta_info"]["completion_tokens"] == 1800, f"the long request: {long_done['g']['meta_info']}")

# Pause with abort ends the running generation as aborted; while paused a new request waits; it
# is answered after /continue_generation.
long_answer = {}
long = threading.Thread(target=lambda: long_answer.update(g=raw("POST", "/generate", {
    "input_ids": prompt_ids, "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True}})[1]))
long.start()
time.sleep(0.3)
status, body = raw("POST", "/pause_generation", {"mode": "abort"})
check(status == 200 and body["status"] == "ok", f"pause: {status} {body}")
long.join()
finish = long_answer["g"]["meta_info"]["finish_reason"]
check(finish["type"] == "abort" and len(long_answer["g"]["output_ids"]) < 1500, f"the running request: {finish}")
waiting_answer = {}
waiting = threading.Thread(target=lambda: waiting_answer.update(g=raw("POST", "/generate", {
    "input_ids": prompt_ids, "sampling_params": {"max_new_tokens": 2}})[1]))
waiting.start()
time.sleep(0.5)
check(not waiting_answer, "a request sent while paused waits")
status, body = raw("POST", "/continue_generation", {})
check(status == 200 and body["status"] == "ok", f"continue: {status} {body}")
waiting.join(timeout=60)
check(waiting_answer.get("g", {}).get("meta_info", {}).get("completion_tokens") == 2, f"after continue: {waiting_answer}")

# Weight update from disk: the version advances and the log-probs become the other folder's.
status, body = raw("POST", "/update_weights_from_disk", {"model_path": OTHER, "weight_version": "7"})
check(status == 200 and body["success"] is True, f"update: {status} {body}")
check(raw("GET", "/get_model_info")[1]["weight_version"] == "7", "model info reports version 7")
status, g = raw("POST", "/generate", {"input_ids": prompt_ids, "return_logprob": True,
                                     "sampling_params": {"temperature": 1.0, "max_new_tokens": 6, "ignore_eos": True}})
check(g["meta_info"]["weight_version"] == "7", "a generation after the update reports version 7")
gen = [x[1] for x in g["meta_info"]["output_token_logprobs"]]
d = max_delta([x[0] for x in g["meta_info"]["output_token_logprobs"]], Reference(OTHER).logprobs(prompt_ids, gen, 1.0))
figures["after_update_max_abs_dlogprob"] = d
check(d < TOL, f"after the update the log-probs differ from the new folder's by {d}")
status, body = raw("POST", "/update_weights_from_disk", {"model_path": "/no/such/folder", "weight_version": "8"})
check(status == 400 and body["success"] is False, f"a missing folder is refused: {status} {body}")
check(raw("GET", "/get_weight_version")[1]["weight_version"] == "7", "a refused update keeps the version")

print(json.dumps(figures))
