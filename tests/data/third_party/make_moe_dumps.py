#!/usr/bin/env python3
"""Routed (mixture-of-experts) layers computed by PyTorch outside qvet, in the way
Hugging Face's Mixtral and Qwen3-MoE blocks compute them, for `qvet verify --spec`:
fp32 softmax over the router logits, top-k, the k weights renormalized and cast to
the hidden dtype; each expert's GEMM on its tokens (weights dequantized from int4
codes and group scales with one rounding to the hidden dtype, products summed in
fp32), its output cast to the hidden dtype, multiplied by the cast weight there
(one rounding), and added into the output with index_add_ in the hidden dtype.
That is the declared combine `rw=out,sum=out`. Two folders must FAIL: the same
Mixtral output declared with the default combine (`rw=acc,sum=f32`: the weight
applied in fp32 before one output rounding, which this layer does not do), and
one whose weights were never renormalized while `softmax-topk-renorm` is declared.

Usage: make_moe_dumps.py OUTDIR  (CPU; needs torch and numpy)."""
import os
import sys

import numpy as np
import torch


def layer(t, e, topk, k, n, g, dtype, renorm, seed):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(t, k, generator=gen) / 4).to(dtype)
    logits = torch.randn(t, e, generator=gen, dtype=torch.float32) * 2
    q = torch.randint(0, 16, (e, k, n), generator=gen, dtype=torch.uint8)
    s = torch.exp2(torch.empty(e, k // g, n).uniform_(-10, -4, generator=gen)).to(dtype)
    probs = torch.softmax(logits, dim=1, dtype=torch.float32)
    w, ids = torch.topk(probs, topk, dim=-1)
    if renorm:
        w = w / w.sum(dim=-1, keepdim=True)
    w = w.to(dtype)
    out = torch.zeros(t, n, dtype=dtype)
    for ex in range(e):
        rows, slot = torch.where(ids == ex)
        if rows.numel() == 0:
            continue
        wq = ((q[ex].to(torch.float32) - 8) * s[ex].to(torch.float32).repeat_interleave(g, dim=0)).to(dtype)
        y = (x[rows].to(torch.float32) @ wq.to(torch.float32)).to(dtype)
        out.index_add_(0, rows, y * w[rows, slot, None])
    return x, logits, q, s, out


def bits(a):
    return a.view(torch.int16).numpy().view("<u2") if a.dtype == torch.bfloat16 else a.numpy()


def write(root, name, spec, expect, arrays):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    x, logits, q, s, out = arrays
    np.save(os.path.join(d, "a.npy"), bits(x))
    np.save(os.path.join(d, "logits.npy"), logits.numpy())
    np.save(os.path.join(d, "q.npy"), q.numpy())
    np.save(os.path.join(d, "scales.npy"), bits(s))
    np.save(os.path.join(d, "out.npy"), bits(out))
    with open(os.path.join(d, "spec"), "w") as f:
        f.write(spec + "\n")
    with open(os.path.join(d, "expect"), "w") as f:
        f.write(expect + "\n")


def main():
    root = sys.argv[1]
    mix = "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,rw=out,sum=out"
    qwen = "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=8,rw=out,sum=out"
    write(root, "moe_hf_mixtral_t37", mix, "PASS", layer(37, 8, 2, 256, 128, 128, torch.float16, True, 1))
    write(root, "moe_hf_qwen3_t19", qwen, "PASS", layer(19, 32, 8, 256, 64, 128, torch.bfloat16, True, 2))
    write(root, "moe_hf_mixtral_t37_declared_acc", mix.replace(",rw=out,sum=out", ""), "FAIL",
          layer(37, 8, 2, 256, 128, 128, torch.float16, True, 1))
    write(root, "tamper_moe_hf_mixtral_no_renorm", mix, "FAIL",
          layer(37, 8, 2, 256, 128, 128, torch.float16, False, 1))


if __name__ == "__main__":
    main()
