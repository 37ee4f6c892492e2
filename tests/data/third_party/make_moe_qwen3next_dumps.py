#!/usr/bin/env python3
"""Qwen3-Next-style routed layers computed by PyTorch, for `qvet verify --spec`
(tests/t_third_party.c): a shared expert weighed by a sigmoid gate
(`sgate=sigmoid`, docs/moe.md), as the transformers Qwen2-MoE and Qwen3-Next
blocks compute it. bf16 router logits; an fp32 softmax over all experts; the
top-k; the k weights divided by their sum and cast to bf16; each expert's GEMM
(int4 codes and bf16 group-32 scales dequantized with one rounding to bf16,
products summed in fp32, cast to bf16) times its bf16 weight, added into the
output with index_add_ in bf16 (`rw=out,sum=out`); the shared expert's bf16
product times sigmoid(x . g) computed by torch's bf16 Linear and sigmoid, added
in bf16.

  moe_hf_qwen3next_t29                  PASS declared sgate=sigmoid
  moe_hf_qwen3next_t29_declared_ungated the same output declared without the gate: FAIL
  tamper_moe_qwen3next_gate_dropped     the shared product added ungated (the bug
                                        lmdeploy #3491 fixed): FAIL

Each folder holds a.npy (T, K) bf16 codes, q.npy (E + 1, K, N) uint8 codes 0..15
(the routed experts, then the shared one), scales.npy (E + 1, K/32, N) bf16
codes, logits.npy (T, E) bf16 codes, shared_gate.npy (1, K) bf16 codes,
ids.npy (T, k) int64, out.npy (T, N) bf16 codes, spec, expect and shared.

Usage: make_moe_qwen3next_dumps.py OUTDIR  (torch on a CPU; no numpy)."""
import os
import struct
import sys

import torch
import torch.nn.functional as F

T, K, N, G = 29, 256, 64, 32  # tokens, reduction depth, output columns, scale group
E, TOPK = 32, 4               # routed experts (one shared besides), experts a token
SPEC = "w=u4b8,ws=bf16/g32,a=bf16,route=softmax-topk-renorm,topk=4,rw=out,sum=out,logits=bf16,sgate=sigmoid"


def save(path, t):
    """A C-ordered .npy of a tensor: int64, uint8, or bf16 codes as <u2."""
    t = t.detach().cpu().contiguous().clone()
    descr = {torch.bfloat16: "<u2", torch.int64: "<i8", torch.uint8: "|u1"}[t.dtype]
    dims = [str(d) for d in t.shape]
    shape = "(" + (dims[0] + "," if len(dims) == 1 else ", ".join(dims)) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(bytes(t.untyped_storage()))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/third_party"
    g = torch.Generator().manual_seed(20261207)
    bf = torch.bfloat16
    x = (torch.randn(T, K, generator=g) / 4).to(bf)
    logits = (torch.randn(T, E, generator=g) * 2).to(bf)
    q = torch.randint(0, 16, (E + 1, K, N), generator=g, dtype=torch.uint8)
    s = torch.exp2(torch.empty(E + 1, K // G, N).uniform_(-8, -3, generator=g)).to(bf)
    wq = ((q.float() - 8) * s.float().repeat_interleave(G, dim=1)).to(bf)
    gate = ((torch.rand(1, K, generator=g) * 2 - 1) * 0.15).to(bf)
    probs = F.softmax(logits, dim=1, dtype=torch.float)
    w, ids = torch.topk(probs, TOPK, dim=-1)
    w = (w / w.sum(dim=-1, keepdim=True)).to(bf)
    routed = torch.zeros(T, N, dtype=bf)
    for ex in range(E):
        rows, slot = torch.where(ids == ex)
        if rows.numel() == 0:
            continue
        y = (x[rows].float() @ wq[ex].float()).to(bf)
        routed.index_add_(0, rows, y * w[rows, slot, None])
    shared = (x.float() @ wq[E].float()).to(bf)
    gated = torch.sigmoid(F.linear(x, gate)) * shared
    cases = (("moe_hf_qwen3next_t29", routed + gated, SPEC, "PASS"),
             ("moe_hf_qwen3next_t29_declared_ungated", routed + gated, SPEC.replace(",sgate=sigmoid", ""), "FAIL"),
             ("tamper_moe_qwen3next_gate_dropped", routed + shared, SPEC, "FAIL"))
    for name, out, spec, expect in cases:
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        files = [("a", x), ("q", q), ("scales", s), ("logits", logits), ("ids", ids), ("out", out)]
        if "sgate" in spec:
            files.append(("shared_gate", gate))
        for f, t in files:
            save(os.path.join(d, f + ".npy"), t)
        for f, text in (("spec", spec), ("expect", expect), ("shared", "1")):
            with open(os.path.join(d, f), "w") as fh:
                fh.write(text + "\n")
    print(f"wrote {len(cases)} folders under {root} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
