#!/usr/bin/env python3
"""DeepSeek-V3-style routed layers computed by PyTorch, for `qvet verify --spec`
(tests/t_third_party.c): the router qvet's group-limited, biased route
declares (docs/moe.md). Sigmoid scores in fp32; a per-expert selection bias
added to them; each group of experts scored by the sum of its two best
biased scores; the best groups kept; the top-k over their experts; the
weights gathered from the unbiased scores, divided by their sum plus 1e-20,
times the routed scaling factor. Each expert is one GEMM, y = x @ W_e with
bf16 x and W_e and an fp32 result (TF32 off); the layer's output is the sum
over a token's experts of weight * y, in fp32 (`rw=acc,sum=f32`, `out=f32`).

Two frameworks differ in how they mask the groups not kept, which matters
when every biased score of a token is below 0 (the bias here is about -0.6
and half the tokens have low logits):

  moe_hf_dsv3_t48                   filled with 0.0, as the transformers gate does:
                                    PASS declared gmask=zero
  moe_hf_dsv3_t48_declared_ninf     the same output declared gmask=ninf: FAIL
  moe_vllm_dsv3_t48                 filled with -inf, as vLLM's grouped_topk: PASS
                                    declared gmask=ninf
  tamper_moe_dsv3_biased_weights    the weights gathered from the biased scores (the
                                    bug vLLM #12002 fixed): FAIL

Each folder holds a.npy (T, K) bf16 codes, q.npy (E, K, N) bf16 codes,
logits.npy (T, E) f32, score_bias.npy (E) f32, the kernel's ids.npy (T, k)
int64 and weights.npy (T, k) f32, out.npy (T, N) f32, spec and expect.

Usage: make_moe_router_dumps.py OUTDIR  (torch on a CPU or a CUDA device; no numpy)."""
import os
import struct
import sys

import torch

T, K, N = 48, 128, 32       # tokens, reduction depth, output columns
E, G, GK, TOPK = 32, 4, 2, 4  # experts, groups, groups kept, experts a token
RSF, EPS = 2.5, 1e-20


def save(path, t):
    """A C-ordered .npy of a tensor: float32, int64, or bf16 codes as <u2."""
    t = t.detach().cpu().clone()  # a storage of exactly its elements
    descr = {torch.bfloat16: "<u2", torch.float32: "<f4", torch.int64: "<i8"}[t.dtype]
    dims = [str(d) for d in t.shape]
    shape = "(" + (dims[0] + "," if len(dims) == 1 else ", ".join(dims)) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(bytes(t.untyped_storage()))


def route(logits, bias, fill, biased_weights=False):
    scores = logits.sigmoid()
    choice = scores + bias
    gs = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
    keep = torch.zeros_like(gs).scatter_(1, torch.topk(gs, k=GK, dim=-1, sorted=False)[1], 1.0)
    keep = keep.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E).bool()
    ids = torch.topk(choice.masked_fill(~keep, fill), k=TOPK, dim=-1, sorted=False)[1]
    w = (choice if biased_weights else scores).gather(1, ids)
    w = w / (w.sum(dim=-1, keepdim=True) + EPS)
    return ids, w * RSF


SPEC = ("w=bf16,a=bf16,out=f32,route=sigmoid-topk-renorm,topk=%d,rsf=2.5,groups=%d,gtopk=%d,gmask=%%s,sbias=f32,"
        "eps=1e-20" % (TOPK, G, GK))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/third_party"
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cpu").manual_seed(20261207)
    x = torch.randn(T, K, generator=g).to(torch.bfloat16)
    w = (torch.randn(E, K, N, generator=g) * 0.05).to(torch.bfloat16)
    logits = torch.randn(T, E, generator=g) * 1.5
    logits[T // 2:] -= 4.0  # low logits: every biased score below 0
    bias = -0.6 + 0.05 * (2 * torch.rand(E, generator=g) - 1)
    xd, wd, ld, bd = x.to(dev), w.to(dev), logits.to(dev), bias.to(dev)
    y = torch.einsum("tk,ekn->ten", xd.float(), wd.float())  # (T, E, N) fp32
    cases = (("moe_hf_dsv3_t48", 0.0, False, "zero", "PASS"),
             ("moe_hf_dsv3_t48_declared_ninf", 0.0, False, "ninf", "FAIL"),
             ("moe_vllm_dsv3_t48", float("-inf"), False, "ninf", "PASS"),
             ("tamper_moe_dsv3_biased_weights", 0.0, True, "zero", "FAIL"))
    for name, fill, biased, mask, expect in cases:
        ids, rw = route(ld, bd, fill, biased)
        o = torch.zeros(T, N, device=dev)
        for c in range(TOPK):
            o += rw[:, c:c + 1] * y[torch.arange(T, device=dev), ids[:, c]]
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for f, t in (("a", x), ("q", w), ("logits", logits), ("score_bias", bias), ("ids", ids),
                     ("weights", rw.float()), ("out", o)):
            save(os.path.join(d, f + ".npy"), t)
        with open(os.path.join(d, "spec"), "w") as f:
            f.write(SPEC % mask + "\n")
        with open(os.path.join(d, "expect"), "w") as f:
            f.write(expect + "\n")
    print(f"wrote {len(cases)} folders under {root} on {dev} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
