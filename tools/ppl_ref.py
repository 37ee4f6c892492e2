#!/usr/bin/env python3
"""Independent reference for qvet's llama forward pass and tokenizer.

It shares no code with eval/: the GGUF file is read by the `gguf` package
(GGUFReader and gguf.quants.dequantize), the text is tokenized by the Hugging
Face `tokenizers` library (a BPE model built from the GGUF vocabulary and
merges, with the Digits(individual) + ByteLevel pre-tokenizers SmolLM2 uses),
and the forward pass is written here in float64 NumPy: RMSNorm, rotary
embedding as complex multiplication, causal grouped-query attention with
repeated KV heads, SwiGLU, tied output embeddings.

Writes a plain-text fixture:
    # header lines (command, model SHA-256, text SHA-256, token count)
    tokens <n> id id id ...
    logit <pos> <token id> <logit>       (top entries at selected positions)
    lse <pos> <log-sum-exp of the logits at pos>

    pip install numpy gguf tokenizers
    python3 tools/ppl_ref.py --model eval/models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --text eval/data/pride-and-prejudice.txt --tokens 128 --top 40 --every 8 \
        --out tests/data/smollm2_logits_ref.txt
"""
import argparse
import hashlib
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def field(reader, key):
    return reader.fields[key].contents()


def tensors(reader):
    out = {}
    for t in reader.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float64)
        # GGUF lists dims fastest-first; NumPy wants slowest-first.
        out[t.name] = w.reshape([int(d) for d in reversed(t.shape)])
    return out


def build_tokenizer(reader):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    toks = field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {}
    for i, s in enumerate(toks):
        vocab.setdefault(s, i)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    pre = field(reader, "tokenizer.ggml.pre")
    steps = []
    if pre == "smollm":
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    return tok


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotary(x, n_heads, head_dim, theta):
    """x (T, n_heads*head_dim): rotate pairs (2p, 2p+1) of each head by pos*theta^(-2p/d)."""
    T = x.shape[0]
    xh = x.reshape(T, n_heads, head_dim // 2, 2)
    z = xh[..., 0] + 1j * xh[..., 1]
    p = np.arange(head_dim // 2)
    ang = np.arange(T)[:, None] * theta ** (-2.0 * p / head_dim)[None, :]
    z = z * np.exp(1j * ang)[:, None, :]
    return np.stack([z.real, z.imag], axis=-1).reshape(T, n_heads * head_dim)


def forward(reader, W, ids):
    a = "llama"
    n_layers = int(field(reader, f"{a}.block_count"))
    n_heads = int(field(reader, f"{a}.attention.head_count"))
    n_kv = int(field(reader, f"{a}.attention.head_count_kv"))
    eps = float(field(reader, f"{a}.attention.layer_norm_rms_epsilon"))
    theta = float(field(reader, f"{a}.rope.freq_base"))
    emb = W["token_embd.weight"]
    dim = emb.shape[1]
    hd = dim // n_heads
    T = len(ids)
    x = emb[np.array(ids)]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(n_layers):
        b = f"blk.{l}."
        h = rms_norm(x, W[b + "attn_norm.weight"], eps)
        q = rotary(h @ W[b + "attn_q.weight"].T, n_heads, hd, theta)
        k = rotary(h @ W[b + "attn_k.weight"].T, n_kv, hd, theta)
        v = h @ W[b + "attn_v.weight"].T
        q = q.reshape(T, n_heads, hd).transpose(1, 0, 2)
        k = np.repeat(k.reshape(T, n_kv, hd).transpose(1, 0, 2), n_heads // n_kv, axis=0)
        v = np.repeat(v.reshape(T, n_kv, hd).transpose(1, 0, 2), n_heads // n_kv, axis=0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(T, dim)
        x = x + o @ W[b + "attn_output.weight"].T
        h = rms_norm(x, W[b + "ffn_norm.weight"], eps)
        g = h @ W[b + "ffn_gate.weight"].T
        u = h @ W[b + "ffn_up.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ W[b + "ffn_down.weight"].T
    x = rms_norm(x, W["output_norm.weight"], eps)
    out = W.get("output.weight", emb)
    return x @ out.T


def ppl(args):
    """The whole text tokenized by HF tokenizers (BOS first only when the file's
    tokenizer.ggml.add_bos_token says so, and then also at each chunk start),
    chunks of ctx tokens, positions ctx/2 .. ctx-2 scored."""
    reader = GGUFReader(args.model)
    tok = build_tokenizer(reader)
    with open(args.text, "rb") as f:
        ids = tok.encode(f.read().decode("utf-8")).ids
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token")) if "tokenizer.ggml.add_bos_token" in reader.fields else False
    bos = int(field(reader, "tokenizer.ggml.bos_token_id"))
    if add_bos:
        ids = [bos] + ids
    W = tensors(reader)
    nll = []
    for c in range(args.ppl_chunks):
        chunk = ids[c * args.ctx:(c + 1) * args.ctx]
        if add_bos:
            chunk = [bos] + chunk[1:]
        z = forward(reader, W, chunk)
        for j in range(args.ctx // 2, args.ctx - 1):
            row = z[j]
            m = row.max()
            nll.append(m + np.log(np.sum(np.exp(row - m))) - row[ids[c * args.ctx + j + 1]])
    nll = np.array(nll)
    err = np.sqrt(np.var(nll) / (len(nll) - 1))
    print(f"model_sha256 {sha256(args.model)} text_sha256 {sha256(args.text)} tokens {len(ids)} ctx {args.ctx}")
    print(f"chunks {args.ppl_chunks} scored {len(nll)} PPL {np.exp(nll.mean()):.6f} +- {np.exp(nll.mean()) * err:.6f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--out")
    ap.add_argument("--ppl-chunks", type=int, default=0,
                    help="instead of a fixture: perplexity of the first N chunks of --ctx tokens, "
                         "llama.cpp protocol (second half of each chunk scored)")
    ap.add_argument("--ctx", type=int, default=512)
    args = ap.parse_args()
    if args.ppl_chunks:
        return ppl(args)
    reader = GGUFReader(args.model)
    tok = build_tokenizer(reader)
    with open(args.text, "rb") as f:
        text = f.read().decode("utf-8")
    enc = tok.encode(text[:20000]).ids
    bos = int(field(reader, "tokenizer.ggml.bos_token_id"))
    ids = [bos] + enc[: args.tokens - 1]
    W = tensors(reader)
    logits = forward(reader, W, ids)
    with open(args.out, "w") as f:
        f.write("# independent reference logits: tools/ppl_ref.py (gguf + tokenizers + float64 NumPy)\n")
        f.write("# command: " + " ".join(sys.argv) + "\n")
        f.write(f"# model_sha256 {sha256(args.model)}\n")
        f.write(f"# text_sha256 {sha256(args.text)}\n")
        f.write(f"# tokens: BOS then the first {len(ids) - 1} tokens of the text\n")
        f.write("tokens %d %s\n" % (len(ids), " ".join(str(i) for i in ids)))
        for pos in range(0, len(ids), args.every):
            row = logits[pos]
            m = row.max()
            lse = m + np.log(np.sum(np.exp(row - m)))
            f.write(f"lse {pos} {lse:.9f}\n")
            for t in np.argsort(-row)[: args.top]:
                f.write(f"logit {pos} {int(t)} {row[t]:.9f}\n")


if __name__ == "__main__":
    main()
