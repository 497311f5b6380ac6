"""Reference side of the tokenizer tests (tests/text/test_hf_tokenizer.cpp), with the `tokenizers` library.

    tokenizer_reference.py files OUT
        Writes tokenizer folders, every file but Qwen3's built and trained here by `tokenizers` itself:
        OUT/qwen3 (Qwen3's own tokenizer.json and tokenizer_config.json, unpacked from tests/fixtures),
        OUT/llama3 (a byte-level BPE with Llama-3's pre-tokenizer, ignore_merges, "a b" string merges, its
        <|begin_of_text|> template and reserved special tokens, plus added tokens with lstrip / rstrip /
        single_word), OUT/gpt2 (GPT-2 style: ByteLevel with its own regex and add_prefix_space),
        OUT/llama3_tools (the Llama-3-style tokenizer with chat_templates.LLAMA3_TOOLS), and the files
        whose splits astraflow hands to Oniguruma or whose parts are SentencePiece's:
        OUT/gpt4o (GPT-4o / o200k's Split, as Phi-4-style files have it), OUT/deepseek3 (DeepSeek-V3's
        Sequence of three Splits: digits, CJK, then its main pattern), OUT/llama2 (SentencePiece-style
        BPE: byte_fallback, Prepend + Replace normalisers, Replace / ByteFallback / Fuse / Strip
        decoders, the <s> template), OUT/mistral (the same model with a Metaspace pre-tokenizer,
        prepend_scheme "first", split false, some <0xNN> tokens missing so that unk and fuse_unk
        occur), OUT/splits (every Split behaviour, invert, a String pattern, a pattern with empty
        matches, Punctuation, Digits) and OUT/words (Lowercase, Strip, regex Replace and NF* normalisers,
        WhitespaceSplit, Whitespace, BertPreTokenizer, CharDelimiterSplit, Metaspace, unk with
        fuse_unk, Metaspace / Replace / Strip decoders, a normalized added token).

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
        "nfc": the string in NFC (Python's unicodedata)}; a decode where tokenizers panics is null.
"""

import json
import lzma
import os
import random
import shutil
import sys
import unicodedata

import chat_templates
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "tokenizers", "qwen3")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")

# GPT-4o's o200k_base pattern (tiktoken), as Phi-4-style tokenizer.json files carry it.
O200K_SPLIT = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])
# DeepSeek-V3's pre-tokenizer: three Splits in a Sequence.
DEEPSEEK3_SPLITS = [r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
                    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|"
                    r"\s*[\r\n]+|\s+(?!\S)|\s+"]

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
# What trips pipelines up: lone combining marks and joiners, SentencePiece's own ▁ and <0xNN> spellings in
# the text, characters whose lowercase or NFKC form is longer, delimiters the test files split on, and the
# SentencePiece-style files' special tokens.
EDGE = ["\u0301", "\u0301\u0301abc", " \u0308", "\u200d", "\ufe0f", "\ufeff", "\ufffd", "\u00ad", "▁", "▁▁ ▁x",
        "<0x41>", "<0xZZ>", "İstanbul", "ΣΑΣ ς", "Straße", "ﬁle", "①②", "１２３", "x-y--z-", "CamelCaseWORD", "a|b||c",
        "<MASK>", "[INST]", " [/INST] ", "<s>", "</s>", "<unk>", "\t\t", "\r", "\u2028", "xxx", "--", "ǅ"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "if x != None and y >= 3:",
        "#include <vector>\nint main() { return 0; }", "SELECT * FROM t WHERE id = 42;", "x = {'a': [1, 2, 3]}\n\n\n",
        "  // comment\n  let y = x?.z ?? 0;", "print(f\"{value:.3f}\")"]


def piece(rng):
    kind = rng.randrange(15)
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
    if kind == 13:
        return rng.choice(EDGE)
    return letters(rng, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1, 12)


def strings(count, seed, out):
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(count):
            s = "".join(piece(rng) for _ in range(rng.randint(1, 6)))
            if i % 50 == 0:
                s = s * rng.randint(5, 30)  # long inputs: long whitespace and word runs
            f.write(json.dumps(s) + "\n")


def corpus_of(seed):
    rng = random.Random(seed)
    return ["".join(piece(rng) for _ in range(rng.randint(1, 8))) for _ in range(4000)]


def train(pre_tokenizer, specials, corpus_seed, ignore_merges=True):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus_of(corpus_seed), trainer)
    return tok


def save(tok, out, name, config=None):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    if config is not None:
        with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False)


def sentencepiece_bpe(corpus_seed, missing_bytes=()):
    """A Llama-2-style BPE: <unk> <s> </s>, the 256 <0xNN> byte tokens (less `missing_bytes`), then merges
    trained over ▁-marked words from a small alphabet, so that rarer characters take the byte fallback."""
    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=150,
                                  show_progress=False)
    trained.train_from_iterator(corpus_of(corpus_seed), trainer)
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for b in range(256):
        if b not in missing_bytes:
            vocab[f"<0x{b:02X}>"] = 3 + b
    for token, i in sorted(trained.get_vocab().items(), key=lambda kv: kv[1]):
        if token not in vocab:
            vocab[token] = 259 + i
    merges = [tuple(m) for m in json.loads(trained.to_str())["model"]["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.add_special_tokens(specials)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def oniguruma_files(out):
    gpt4o = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(O200K_SPLIT), behavior="isolated"),
                                           pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
                  ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], 5, ignore_merges=False)
    save(gpt4o, out, "gpt4o")

    bos = "<｜begin▁of▁sentence｜>"
    deepseek = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), behavior="isolated")
                                              for p in DEEPSEEK3_SPLITS] +
                                             [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
                     [bos, "<｜end▁of▁sentence｜>"], 6, ignore_merges=False)
    deepseek.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                            special_tokens=[(bos, deepseek.token_to_id(bos))])
    save(deepseek, out, "deepseek3", {"bos_token": bos, "eos_token": "<｜end▁of▁sentence｜>"})

    splits = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"(?=\p{Lu})"), behavior="merged_with_next"),  # empty matches
        pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_previous", invert=True),
        pre_tokenizers.Split(Regex(r"[\p{P}\p{S}]"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"\t|\r"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"[\p{L}\p{M}]+"), behavior="merged_with_next", invert=True),
        pre_tokenizers.Split(Regex(r"x+"), behavior="contiguous", invert=True),
        pre_tokenizers.Punctuation(behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)]), ["<|endoftext|>"], 7)
    splits.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 0, 1)])
    splits.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r" {4,}"), "    "),
                                              normalizers.Replace("``", '"')])
    save(splits, out, "splits")

    words = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    words.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Replace(Regex(r"\p{Mn}+"), ""),
                                             normalizers.Lowercase(), normalizers.NFKC(),
                                             normalizers.Strip(left=True, right=False)])
    words.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.CharDelimiterSplit("|"), pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Whitespace(),
        pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    words.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always"),
                                       decoders.Replace(Regex(" {2,}"), " "), decoders.Strip(" ", 1, 0)])
    words.train_from_iterator(corpus_of(8), trainers.BpeTrainer(vocab_size=1200, special_tokens=["<unk>"],
                                                                limit_alphabet=60, show_progress=False))
    words.add_tokens([AddedToken("<mask>", normalized=True)])
    save(words, out, "words")

    llama2 = sentencepiece_bpe(9)
    llama2.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    save(llama2, out, "llama2", {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})

    mistral = sentencepiece_bpe(10, missing_bytes=range(0xF0, 0xF8))  # no 4-byte characters: they are unk
    mistral.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    mistral.add_special_tokens(["[INST]", "[/INST]"])
    save(mistral, out, "mistral", {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})


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
    save(gpt2, out, "gpt2")
    oniguruma_files(out)


def decode(tok, ids, skip_special_tokens):
    """tok.decode, or None where tokenizers panics (its Strip decoder indexes past an empty token's end)."""
    os.environ["RUST_BACKTRACE"] = "0"  # the panic's one line is enough
    try:
        return tok.decode(ids, skip_special_tokens=skip_special_tokens)
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return None


def encode(folder, strings_file, out):
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    with open(strings_file, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            s = json.loads(line)
            ids = tok.encode(s).ids
            plain = tok.encode(s, add_special_tokens=False).ids
            o.write(json.dumps({"ids": ids, "plain": plain, "decoded": decode(tok, plain, False),
                                "skipped": decode(tok, ids, True), "nfc": unicodedata.normalize("NFC", s)}) + "\n")


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
