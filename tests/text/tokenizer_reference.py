"""Reference side of the tokenizer tests (tests/text/test_hf_tokenizer.cpp), with the `tokenizers` library.

    tokenizer_reference.py files OUT
        Writes three tokenizer folders: OUT/qwen3 (Qwen3's own tokenizer.json and tokenizer_config.json,
        unpacked from tests/fixtures), OUT/llama3 (a byte-level BPE trained here with Llama-3's
        pre-tokenizer, ignore_merges, "a b" string merges, its <|begin_of_text|> template and
        reserved special tokens, plus added tokens with lstrip / rstrip / single_word) and
        OUT/gpt2 (GPT-2 style: ByteLevel with its own regex and add_prefix_space), and
        OUT/llama3_tools (the Llama-3-style tokenizer with chat_templates.LLAMA3_TOOLS).

    tokenizer_reference.py strings COUNT SEED OUT
        COUNT generated strings, one JSON string per line: ASCII prose, contractions, numbers,
        whitespace runs and newlines, code, CJK, Arabic and other scripts, emoji, combining marks,
        special-token spellings and random mixtures.

    tokenizer_reference.py conversations COUNT SEED OUT
        COUNT generated conversations (tests/text/chat_templates.py), one JSON object per line.

    tokenizer_reference.py chat CONVERSATIONS FOLDER[,FOLDER...]
        Writes FOLDER/chat.jsonl: for each conversation, {"text": AutoTokenizer.apply_chat_template(...,
        tokenize=False)}, or {"error": ...} where the template raises.

    tokenizer_reference.py encode FOLDER STRINGS OUT
        For each string: {"ids": encode(s).ids, "plain": encode(s, add_special_tokens=False).ids,
        "decoded": decode(plain, skip_special_tokens=False), "skipped": decode(ids),
        "nfc": the string in NFC (Python's unicodedata)}.
"""

import json
import lzma
import os
import random
import shutil
import sys
import unicodedata

import chat_templates
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "tokenizers", "qwen3")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was for that with as on by at from his her they we you it this have are not but "
         "model token train reward policy gradient rollout batch learning cluster weights version server "
         "Hello World Python Tokenizer QWEN Llama GPU MPI").split()


def letters(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def assigned(rng, lo, hi):
    while True:
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            return c


CJK = [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3)]
SCRIPTS = [(0x0600, 0x06FF), (0x0590, 0x05FF), (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x0400, 0x04FF), (0x0370, 0x03FF),
           (0x00C0, 0x024F)]
EMOJI = ["😀", "🚀", "👍🏽", "👩‍💻", "🇩🇪", "❤️", "🤖", "🧪", "👨‍👩‍👧", "✅", "🔥", "🙂"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b",
          "\x0c", "\x1c", "\u2009", "\u200b", "    \n    "]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|begin_of_text|>",
            "<|eot_id|>", "<|start_header_id|>", "<|im_st", "<|", "|>", "<mask>", "[tool]", "cat", "<|reserved_special_token_3|>"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "if x != None and y >= 3:",
        "#include <vector>\nint main() { return 0; }", "SELECT * FROM t WHERE id = 42;", "x = {'a': [1, 2, 3]}\n\n\n",
        "  // comment\n  let y = x?.z ?? 0;", "print(f\"{value:.3f}\")"]


def piece(rng):
    kind = rng.randrange(14)
    if kind == 0:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) + rng.choice(["", ".", "!", "?", ",", "..."])
    if kind == 1:
        return rng.choice(WORDS) + rng.choice(["'s", "'S", "'re", "'VE", "'m", "'ll", "'LL", "'d", "'t", "\u017f", "'\u017f",
                                              "'x", "'", "''s"])
    if kind == 2:
        n = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 14)))
        return rng.choice(["", " ", "$", "-", "+", "#"]) + n + rng.choice(["", ".5", ",000", "%", "th", " kg", "\u0663\u0664"])
    if kind == 3:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 4)))
    if kind == 4:
        return rng.choice(CODE)
    if kind == 5:
        lo, hi = rng.choice(CJK)
        return "".join(assigned(rng, lo, hi) for _ in range(rng.randint(1, 10)))
    if kind == 6:
        lo, hi = rng.choice(SCRIPTS)
        return " ".join("".join(assigned(rng, lo, hi) for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 4)))
    if kind == 7:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind == 8:  # combining marks: decomposed letters (Qwen3's NFC composes them) and stacked marks
        base = letters(rng, "aeiouncAEIOU", 1, 4)
        return "".join(ch + rng.choice(["\u0301", "\u0300", "\u0308", "\u0323\u0302", "\u0327", ""]) for ch in base)
    if kind == 9:
        return rng.choice(SPECIALS)
    if kind == 10:
        return letters(rng, "!@#$%^&*()[]{}<>/\\|~`-_=+;:\"',.?", 1, 6)
    if kind == 11:
        return rng.choice([" <mask> ", "<mask>", "  [tool]  x", "cat", " cat ", "concat", "cat_", "catalog", "(cat)", "cat5"])
    if kind == 12:  # random assigned code points from the whole BMP and a little beyond
        return "".join(assigned(rng, 0x20, 0x2FFFF) for _ in range(rng.randint(1, 5)))
    return letters(rng, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1, 12)


def strings(count, seed, out):
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(count):
            s = "".join(piece(rng) for _ in range(rng.randint(1, 6)))
            if i % 50 == 0:
                s = s * rng.randint(5, 30)  # long inputs: long whitespace and word runs
            f.write(json.dumps(s) + "\n")


def train(pre_tokenizer, specials, corpus_seed):
    rng = random.Random(corpus_seed)
    corpus = ["".join(piece(rng) for _ in range(rng.randint(1, 8))) for _ in range(4000)]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    return tok


def files(out):
    qwen = os.path.join(out, "qwen3")
    os.makedirs(qwen, exist_ok=True)
    with lzma.open(os.path.join(FIXTURE, "tokenizer.json.xz")) as src, open(os.path.join(qwen, "tokenizer.json"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copyfile(os.path.join(FIXTURE, "tokenizer_config.json"), os.path.join(qwen, "tokenizer_config.json"))

    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(8)]
    llama = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                           pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), specials, 3)
    llama.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False),
                      AddedToken("[tool]", rstrip=True, normalized=False),
                      AddedToken("cat", single_word=True, normalized=False)])
    bos = llama.token_to_id("<|begin_of_text|>")
    llama.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    folder = os.path.join(out, "llama3")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.json")
    llama.save(path)
    # Llama-3's own file spells merges as "a b" strings (older tokenizers); this one does too.
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "tokenizer_class": "PreTrainedTokenizerFast",
                   "chat_template": chat_templates.LLAMA3}, f)
    tools = os.path.join(out, "llama3_tools")
    os.makedirs(tools, exist_ok=True)
    shutil.copyfile(path, os.path.join(tools, "tokenizer.json"))
    with open(os.path.join(tools, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "tokenizer_class": "PreTrainedTokenizerFast",
                   "chat_template": chat_templates.LLAMA3_TOOLS}, f)

    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True), ["<|endoftext|>"], 4)
    folder = os.path.join(out, "gpt2")
    os.makedirs(folder, exist_ok=True)
    gpt2.save(os.path.join(folder, "tokenizer.json"))


def encode(folder, strings_file, out):
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    with open(strings_file, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            s = json.loads(line)
            ids = tok.encode(s).ids
            plain = tok.encode(s, add_special_tokens=False).ids
            o.write(json.dumps({"ids": ids, "plain": plain, "decoded": tok.decode(plain, skip_special_tokens=False),
                                "skipped": tok.decode(ids), "nfc": unicodedata.normalize("NFC", s)}) + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "files":
        files(sys.argv[2])
    elif cmd == "strings":
        strings(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif cmd == "conversations":
        chat_templates.conversations(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif cmd == "chat":
        chat_templates.render(sys.argv[3].split(","), sys.argv[2])
    elif cmd == "encode":
        encode(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown command {cmd}")
