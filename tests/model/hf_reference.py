"""Reference side of the Hugging Face model tests (tests/model/test_hf_model.cpp).

    hf_reference.py make FAMILY[,FAMILY...] OUT SEED
        For each FAMILY, into OUT/FAMILY: makes a random model with transformers' own classes, saves it with
        save_pretrained (config.json + model.safetensors), loads it back with
        AutoModelForCausalLM.from_pretrained and writes reference.json: random token
        sequences and, for each, log p(token_t | tokens_<t) at every position t >= 1 under the
        reloaded model (float32, CPU, eager attention).

    hf_reference.py score FOLDER SEED
        The same reference.json for a folder astraflow wrote (init-model, export-hf), loaded with
        AutoModelForCausalLM; when AutoTokenizer loads the folder too, adds the ids it gives a few
        strings, its rendering of a one-turn chat and its eos token.

    hf_reference.py resave FOLDER OUT
        Loads FOLDER with AutoModelForCausalLM / AutoTokenizer and saves both into OUT with
        save_pretrained (the round trip astraflow -> transformers -> astraflow).

    hf_reference.py gguf FOLDER GGUF_FILE [FOLDER GGUF_FILE ...]
        Checks `astraflow export-gguf` files against the folders they came from (one JSON line each), with the `gguf`
        reader and transformers' GGUF loader (which undoes llama.cpp's q/k row order): prints a
        JSON object with the metadata read back, the largest |Δ| between the GGUF model's
        weights and the folder's (after the dtype's rounding), the largest |Δ log-prob| over 8
        random sequences, and whether the GGUF tokenizer lists the folder's vocabulary and merges.

    hf_reference.py bpe_tokenizer OUT
        Trains a small byte-level BPE with `tokenizers` (Llama-3's split regex, 600 entries, merges,
        <|begin_of_text|> put before every text, <|eot_id|> as eos) into OUT/tokenizer.json and
        OUT/tokenizer_config.json (with a chat template).

FAMILY: qwen3, qwen3_tied, qwen2, llama3_rope, llama_linear_rope.
Every weight, norms and biases included, is drawn at random (transformers initialises norms
to 1 and biases to 0, which would leave those code paths untested), with a spread large enough
that the next-token distributions are far from uniform.
"""

import json
import sys

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

VOCAB = 97
COMMON = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=96, rms_norm_eps=1e-6)


def build(family):
    if family == "qwen3":
        # head_dim 16 is not hidden_size / heads (12): config.json's head_dim must be used.
        return Qwen3ForCausalLM(Qwen3Config(**COMMON, head_dim=16, rope_parameters={"rope_type": "default",
                                                                                      "rope_theta": 5000.0}))
    if family == "qwen3_tied":
        return Qwen3ForCausalLM(Qwen3Config(**COMMON, head_dim=12, tie_word_embeddings=True, attention_bias=True))
    if family == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**COMMON, rope_parameters={"rope_type": "default",
                                                                       "rope_theta": 1000000.0}))
    if family == "llama3_rope":
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
        return LlamaForCausalLM(LlamaConfig(**COMMON, rope_parameters=rope, attention_bias=True, mlp_bias=True))
    if family == "llama_linear_rope":
        rope = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}
        return LlamaForCausalLM(LlamaConfig(**{**COMMON, "num_key_value_heads": 4}, rope_parameters=rope))
    raise SystemExit(f"unknown family {family}")


def make(family, out, seed):
    torch.manual_seed(seed)
    model = build(family)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn_like(p))
            else:
                p.copy_(0.25 * torch.randn_like(p))
    model.save_pretrained(out)

    score(out, seed)


def score(out, seed):
    """Loads the folder `out` with transformers and writes out/reference.json."""
    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    reloaded.eval()
    vocab = reloaded.config.vocab_size
    limit = reloaded.config.max_position_embeddings
    gen = torch.Generator().manual_seed(seed + 1)
    sequences, logprobs = [], []
    for i in range(18):
        length = int(torch.randint(2, 60, (1,), generator=gen)) if i else min(90, limit)
        ids = torch.randint(0, vocab, (length,), generator=gen)
        with torch.no_grad():
            logits = reloaded(input_ids=ids[None]).logits[0].float()
        lp = torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:, None])[:, 0]
        sequences.append(ids.tolist())
        logprobs.append([0.0] + lp.tolist())
    result = {"sequences": sequences, "logprobs": logprobs}
    try:
        tokenizer = AutoTokenizer.from_pretrained(out)
    except (OSError, ValueError):
        tokenizer = None
    if tokenizer is not None:
        texts = ["hello world", "what is 12*(3+4)? <answer>84</answer>", "Tab\tand\nnewline", "caf\u00e9 \u4e2d\u6587 \U0001F600", "<|im_start|>user"]
        result["tokenized"] = {t: tokenizer(t)["input_ids"] for t in texts}
        result["eos_token"] = tokenizer.eos_token
        if tokenizer.chat_template:
            chat = [{"role": "user", "content": "2+2?"}]
            result["chat"] = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    with open(f"{out}/reference.json", "w") as f:
        json.dump(result, f)


def resave(src, dst):
    """Loads an astraflow-written folder with transformers and saves it again with save_pretrained."""
    AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)


def bpe_tokenizer(out):
    import os
    import random
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    rng = random.Random(1)
    words = "the model learns a policy from rewards and tokens 12 345 while ranks exchange weights".split()
    corpus = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(500)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        special_tokens=["<|begin_of_text|>", "<|eot_id|>"],
                                                        show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", 0)])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                   "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"}, f)


def gguf_check(folder, gguf_file):
    import os
    from gguf import GGUFReader
    reader = GGUFReader(gguf_file)

    def field(name):
        f = reader.fields.get(name)
        return None if f is None else f.contents()

    tok = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    vocab = {i: t for t, i in tok["model"]["vocab"].items()}
    vocab.update({a["id"]: a["content"] for a in tok.get("added_tokens", [])})
    tokens = field("tokenizer.ggml.tokens")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    # Every GGUF tensor against the folder's, renamed and (Llama q/k) re-ordered as llama.cpp's converter does.
    from safetensors.torch import load_file
    hf = {}
    for name in os.listdir(folder):
        if name.endswith(".safetensors"):
            hf.update(load_file(os.path.join(folder, name)))
    config = json.load(open(os.path.join(folder, "config.json")))
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    expected = {"token_embd.weight": hf["model.embed_tokens.weight"], "output_norm.weight": hf["model.norm.weight"]}
    if "lm_head.weight" in hf:
        expected["output.weight"] = hf["lm_head.weight"]
    for name, t in hf.items():
        if not name.startswith("model.layers."):
            continue
        _, _, layer, rest = name.split(".", 3)
        part, kind = rest.rsplit(".", 1)
        if config["architectures"][0] == "LlamaForCausalLM" and part in ("self_attn.q_proj", "self_attn.k_proj"):
            heads = config["num_attention_heads"] if part == "self_attn.q_proj" else config["num_key_value_heads"]
            t = t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)
        expected[f"blk.{layer}.{parts[part]}.{kind}"] = t
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if rope.get("rope_type") == "llama3":  # rope_freqs.weight as llama.cpp's converter computes it
        import math
        dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        old = rope["original_max_position_embeddings"]
        low, high, factor = old / rope["low_freq_factor"], old / rope["high_freq_factor"], rope["factor"]
        factors = []
        for f in freqs:
            wavelen = 2 * math.pi / f
            if wavelen < high:
                factors.append(1)
            elif wavelen > low:
                factors.append(factor)
            else:
                smooth = (old / wavelen - rope["low_freq_factor"]) / (rope["high_freq_factor"] - rope["low_freq_factor"])
                factors.append(1 / ((1 - smooth) / factor + smooth))
        expected["rope_freqs.weight"] = torch.tensor(factors, dtype=torch.float32)
    tensor_error = 0.0
    names = set()
    for t in reader.tensors:
        names.add(t.name)
        want = expected[t.name].float()
        if t.tensor_type.name == "BF16":  # gguf gives the raw 16-bit words
            data = torch.from_numpy(t.data.copy().view("int16")).view(torch.bfloat16).float()
            want = want.bfloat16().float()  # the same round-to-nearest-even as astraflow's
        elif t.tensor_type.name == "F16":
            data = torch.from_numpy(t.data.copy()).float()
            want = want.half().float()
        else:
            data = torch.from_numpy(t.data.copy()).float()
        error = (data.reshape(want.shape) - want).abs().max().item()
        if t.name == "rope_freqs.weight":  # float32 pow may differ by an ulp between libm and torch
            error = 0.0 if error <= 1e-6 * want.abs().max().item() else error
        tensor_error = max(tensor_error, error)

    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    keys_equal, weight_error, worst = False, None, None
    try:
        got = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf_file), gguf_file=os.path.basename(gguf_file),
                                                   dtype=torch.float32).eval()
        ref_sd, got_sd = ref.state_dict(), got.state_dict()
        keys_equal = sorted(ref_sd) == sorted(got_sd)  # transformers' GGUF config has no attention_bias for Llama
        weight_error = max((ref_sd[k] - got_sd[k]).abs().max().item() for k in ref_sd if k in got_sd)
    except RuntimeError:  # transformers' Qwen3 GGUF config reads no head_dim: only its default (128) loads
        pass
    torch.manual_seed(3)
    with torch.no_grad():
        for _ in range(8 if keys_equal else 0):
            ids = torch.randint(0, ref.config.vocab_size, (1, 24))
            a = torch.log_softmax(ref(ids).logits.float(), -1)
            b = torch.log_softmax(got(ids).logits.float(), -1)
            worst = max(worst or 0.0, (a - b).abs().max().item())
    print(json.dumps({
        "file": gguf_file,
        "architecture": field("general.architecture"),
        "tensors": len(reader.tensors),
        "names_match": names == set(expected),
        "tensor_error": tensor_error,
        "keys_equal": keys_equal,
        "weight_error": weight_error,
        "logprob_error": worst,
        "tokens_match": all(tokens[i] == t for i, t in vocab.items()) and len(tokens) == ref.config.vocab_size,
        "merges_match": field("tokenizer.ggml.merges") == merges,
        "eos_token_id": field("tokenizer.ggml.eos_token_id"),
        "bos_token_id": field("tokenizer.ggml.bos_token_id"),
        "add_bos_token": field("tokenizer.ggml.add_bos_token"),
        "merges": len(merges),
        "pre": field("tokenizer.ggml.pre"),
        "chat_template": field("tokenizer.chat_template") is not None,
    }), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "bpe_tokenizer":
        bpe_tokenizer(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) >= 4 and sys.argv[1] == "gguf":
        for k in range(2, len(sys.argv) - 1, 2):
            gguf_check(sys.argv[k], sys.argv[k + 1])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "resave":
        resave(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "score":
        score(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    if len(sys.argv) != 5 or sys.argv[1] != "make":
        raise SystemExit(__doc__)
    for family in sys.argv[2].split(","):
        make(family, f"{sys.argv[3]}/{family}", int(sys.argv[4]))
