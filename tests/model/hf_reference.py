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


if __name__ == "__main__":
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
