#!/usr/bin/env python3
"""Writes the tokenizer fixtures for tests/t_tokenizer.c and tests/m_eval_real.c.
The expected token ids come from the Hugging Face `tokenizers` library (Rust), an
implementation independent of eval/tokenizer.c.

  tests/data/tok_tiny.txt     a small byte-level BPE trained here by tokenizers'
                              BpeTrainer (vocabulary and merges stored in the
                              fixture) and the ids it gives for the test strings;
  tests/data/tok_smollm2.txt  the ids SmolLM2's vocabulary gives (needs the model:
                              tools/fetch-model.sh).

    pip install gguf tokenizers
    python3 eval/gen_tok_fixture.py eval/models/SmolLM2-135M-Instruct.Q4_1.gguf
Lines: "vocab N", "t HEX" per token, "merges N", "m HEX HEX" per merge, and
"case HEX N id..." per string; HEX is the UTF-8 bytes in hexadecimal.
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CASES = [
    "Hello world",
    "It is a truth universally acknowledged, that a single man",
    "Don't you'll we're I've she'd he's it'll I'M",
    "abc123def 2024 and 3.14159",
    "  two spaces,   three, trailing   ",
    "line one\nline two\n\nnew paragraph\r\n\ttab",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c9lise",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 and \u0440\u0443\u0441\u0441\u043a\u0438\u0439",
    "emoji \U0001F44D\U0001F3FD ok!!! ...?! \u00a7\u00b6",
    "\"Quoted,\" she said -- 'single' (paren) [bracket] {brace}",
    "Mr. Darcy's estate, \u00a310,000 a year; Netherfield.",
    " leading space",
    "\u2163 roman four and \u00bd half and \u0663 arabic three",
    "a\u00a0nbsp\u2003em-space\u3000ideographic",
    "",
]

TINY_CORPUS = [
    "It is a truth universally acknowledged, that a single man in possession",
    "of a good fortune, must be in want of a wife. Don't you think so? I'll say",
    "the feelings or views of such a man may be on his first entering a",
    "neighbourhood, 1811 or 1812, 3 daughters and 5000 pounds; caf\u00e9 na\u00efve",
    "    indented line\n\n\tand a tab; hello hello hello world world",
] * 20


def hx(s):
    return s.encode("utf-8").hex() if isinstance(s, str) else s.hex()


def configure(tok, digits=True):
    steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()


def write_cases(f, tok):
    for s in CASES:
        ids = tok.encode(s).ids
        f.write("case %s %d %s\n" % (hx(s) or "-", len(ids), " ".join(map(str, ids))))


def tiny(path):
    tok = Tokenizer(models.BPE())
    configure(tok)
    tr = trainers.BpeTrainer(vocab_size=420, min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TINY_CORPUS, tr)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    import json
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in merges]
    with open(path, "w") as f:
        f.write("# tiny byte-level BPE: trained and encoded by HF tokenizers (eval/gen_tok_fixture.py)\n")
        f.write("vocab %d\n" % len(vocab))
        for s, _ in vocab:
            f.write("t %s\n" % hx(s))
        f.write("merges %d\n" % len(merges))
        for a, b in merges:
            f.write("m %s %s\n" % (hx(a), hx(b)))
        write_cases(f, tok)


def smollm2(model, path):
    from gguf import GGUFReader
    r = GGUFReader(model)
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ", 1)) for m in r.fields["tokenizer.ggml.merges"].contents()]
    vocab = {}
    for i, s in enumerate(toks):
        vocab.setdefault(s, i)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    configure(tok, digits=r.fields["tokenizer.ggml.pre"].contents() == "smollm")
    with open(path, "w") as f:
        f.write("# SmolLM2-135M-Instruct ids from HF tokenizers (eval/gen_tok_fixture.py)\n")
        write_cases(f, tok)


if __name__ == "__main__":
    tiny("tests/data/tok_tiny.txt")
    if len(sys.argv) > 1:
        smollm2(sys.argv[1], "tests/data/tok_smollm2.txt")
