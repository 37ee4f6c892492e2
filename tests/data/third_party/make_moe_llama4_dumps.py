#!/usr/bin/env python3
"""Llama-4-style routed layers computed by PyTorch, for `qvet verify --spec`
(tests/t_third_party.c): the router weight applied to the expert's input
(`rw=in`, docs/moe.md). bf16 router logits; the top-1 expert; its weight the
fp32 sigmoid of its logit; the token's activations times that weight cast to
bf16 (`x * w.to(x.dtype)`, one bf16 rounding each); each expert's GEMM on those
(int4 codes and bf16 group-32 scales dequantized with one rounding to bf16,
products summed in fp32, the result cast to bf16).

  moe_hf_llama4_t37             as the transformers Llama 4 block: the shared
                                expert's bf16 output plus the routed one, added
                                in bf16 (`sum=out`, `--shared 1`); its ids
  moe_vllm_llama4_t37           as vLLM's fused MoE with apply_router_weight_on_input:
                                the routed product alone, cast to bf16; its ids
                                and fp32 weights
  moe_vllm_llama4_t37_declared_acc   the vLLM output declared with the weight on
                                the product (`rw=acc`, the default): FAIL, since the
                                weight's bf16 rounding moves each product by up to
                                2^-9 of it, beyond the fp32 combine's bound
  tamper_moe_llama4_weight_twice   the hf layer with the routed product weighed
                                again by the bf16 weight (the bug vLLM #43694
                                fixed): FAIL

Each folder holds a.npy (T, K) bf16 codes, q.npy (X, K, N) uint8 codes 0..15
(the 16 experts, then the shared one), scales.npy (X, K/32, N) bf16 codes,
logits.npy (T, E) bf16 codes, ids.npy (T, 1) int64, weights.npy (T, 1) f32
(vLLM only), out.npy (T, N) bf16 codes, spec, expect, and shared (the count)
where there is a shared expert.

Usage: make_moe_llama4_dumps.py OUTDIR  (torch on a CPU or a CUDA device; no numpy)."""
import os
import struct
import sys

import torch

T, K, N, G = 37, 256, 64, 32  # tokens, reduction depth, output columns, scale group
E = 16                         # routed experts (one shared besides)
SPEC = "w=u4b8,ws=bf16/g32,a=bf16,route=sigmoid-topk,topk=1,rw=in,sum=out,logits=bf16"


def save(path, t):
    """A C-ordered .npy of a tensor: float32, int64, uint8, or bf16 codes as <u2."""
    t = t.detach().cpu().contiguous().clone()
    descr = {torch.bfloat16: "<u2", torch.float32: "<f4", torch.int64: "<i8", torch.uint8: "|u1"}[t.dtype]
    dims = [str(d) for d in t.shape]
    shape = "(" + (dims[0] + "," if len(dims) == 1 else ", ".join(dims)) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(bytes(t.untyped_storage()))


def gemm(x, wq):
    """bf16 x @ bf16 weights, summed in fp32 (TF32 off), cast to bf16."""
    return (x.float() @ wq.float()).to(torch.bfloat16)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/third_party"
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cpu").manual_seed(20261207)
    x = (torch.randn(T, K, generator=g) / 4).to(torch.bfloat16)
    logits = (torch.randn(T, E, generator=g) * 2).to(torch.bfloat16)
    q = torch.randint(0, 16, (E + 1, K, N), generator=g, dtype=torch.uint8)
    s = torch.exp2(torch.empty(E + 1, K // G, N).uniform_(-8, -3, generator=g)).to(torch.bfloat16)
    wq = ((q.float() - 8) * s.float().repeat_interleave(G, dim=1)).to(torch.bfloat16).to(dev)
    xd = x.to(dev)
    top, ids = torch.topk(logits.to(dev), 1, dim=-1)
    w32 = torch.sigmoid(top.float())                 # (T, 1) fp32
    routed_in = xd * w32.to(torch.bfloat16)            # bf16: one rounding each
    routed = torch.stack([gemm(routed_in[t:t + 1], wq[ids[t, 0]])[0] for t in range(T)])
    shared = gemm(xd, wq[E])
    vllm = SPEC.replace(",sum=out", "")
    cases = (("moe_hf_llama4_t37", shared + routed, True, False, SPEC, "PASS"),
             ("moe_vllm_llama4_t37", routed, False, True, vllm, "PASS"),
             ("moe_vllm_llama4_t37_declared_acc", routed, False, True, vllm.replace(",rw=in", ""), "FAIL"),
             ("tamper_moe_llama4_weight_twice", shared + routed * w32.to(torch.bfloat16), True, False, SPEC, "FAIL"))
    for name, out, with_shared, with_weights, spec, expect in cases:
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        nx = E + 1 if with_shared else E
        files = [("a", x), ("q", q[:nx]), ("scales", s[:nx]), ("logits", logits), ("ids", ids), ("out", out)]
        if with_weights:
            files.append(("weights", w32))
        for f, t in files:
            save(os.path.join(d, f + ".npy"), t)
        with open(os.path.join(d, "spec"), "w") as f:
            f.write(spec + "\n")
        with open(os.path.join(d, "expect"), "w") as f:
            f.write(expect + "\n")
        if with_shared:
            with open(os.path.join(d, "shared"), "w") as f:
                f.write("1\n")
    print(f"wrote {len(cases)} folders under {root} on {dev} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
