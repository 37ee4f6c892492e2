#!/usr/bin/env python3
"""FP4 GEMMs computed outside qvet, on a CPU, for `qvet verify --spec`.

- `torchao_*`: torchao's FP4 emulation (torchao.prototype.mx_formats). `MXTensor.to_mx`
  (e2m1 codes, an e8m0 scale per 32) and `NVFP4Tensor.to_nvfp4` (e2m1 codes, a ue4m3 scale
  per 16, an optional fp32 per-tensor scale) quantize a weight; their `dequantize` makes the
  f16/bf16 weight that PyTorch's CPU GEMM (`F.linear`: fp32 accumulation, a bias added in fp32
  before the one rounding) then multiplies. The codes and scales are read back from the
  quantized tensor with torchao's own unpacking, so qvet sees what torchao stored.
- `moe_hf_gptoss_*`: a gpt-oss-style routed layer with MXFP4 experts and a bias, computed the
  way Hugging Face's GptOss block computes it on a CPU: router logits in bf16, the top 4, a
  softmax over those 4 rounded to bf16; each expert's weights dequantized from its e2m1 codes
  and e8m0 scales into bf16 (exact); its GEMM on its tokens rounded to bf16, its bias added in
  bf16 (a second rounding), the product times the router weight in bf16 and added into the
  output with `index_add_` in bf16.
- `tamper_fp4_*`: a correct output declared with one thing wrong (the two codes of each byte
  read in the other order, every MX scale one exponent too large, a bias the kernel did not
  add); all must FAIL.

Usage: make_fp4_dumps.py OUTDIR  (CPU; needs torch, torchao and numpy)."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

FMT = {torch.bfloat16: "bf16", torch.float16: "f16"}


def bits(t):
    """bf16 as <u2 bits (qvet's convention), f16 and f32 as they are."""
    return t.view(torch.int16).numpy().view("<u2") if t.dtype == torch.bfloat16 else t.numpy()


def codes_kn(qdata, n, k):
    """torchao's packed (N, K/2) e2m1 bytes as qvet's (K, N) codes, unpacked by torchao."""
    return unpack_uint4(qdata.view(torch.uint8).contiguous()).view(n, k).t().contiguous().numpy()


def write(root, name, spec, expect, arrays):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    for key, val in arrays.items():
        np.save(os.path.join(d, key + ".npy"), val)
    with open(os.path.join(d, "spec"), "w") as f:
        f.write(spec + "\n")
    with open(os.path.join(d, "expect"), "w") as f:
        f.write(expect + "\n")


def mx_case(m, n, k, dtype, seed, bias=False, block_exp=None):
    """An MXFP4 weight quantized by torchao (from fp32: its quantizer takes bf16 or fp32),
    dequantized to dtype, times (m, k) activations. block_exp shifts every weight row by
    2^block_exp before quantizing (the block scales follow)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen) * 0.05
    if block_exp is not None:
        w = w * 2.0**block_exp
    a = torch.randn(m, k, generator=gen).to(dtype)
    if block_exp is not None:
        a = (a.float() * 2.0 ** (-block_exp - 12)).to(dtype)
    b = torch.randn(n, generator=gen).to(dtype) if bias else None
    t = MXTensor.to_mx(w, torch.float4_e2m1fn_x2, 32)
    out = F.linear(a, t.dequantize(dtype), b)
    arrays = {"a": bits(a), "q": codes_kn(t.qdata, n, k),
              "scales": t.scale.view(torch.uint8).view(n, k // 32).t().contiguous().numpy(), "out": bits(out)}
    if bias:
        arrays["bias"] = bits(b)
    return arrays


def nv_case(m, n, k, dtype, seed, gscale):
    """An NVFP4 weight quantized by torchao from bf16 with per-tensor scale gscale (None:
    none; 'amax': torchao's calibration, amax / (448 * 6); else the given float)."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, k, generator=gen) * 0.05).to(torch.bfloat16)
    a = torch.randn(m, k, generator=gen).to(dtype)
    g = None
    if gscale == "amax":
        g = w.float().abs().max() / (448.0 * 6.0)
    elif gscale is not None:
        g = torch.tensor(gscale, dtype=torch.float32)
    t = NVFP4Tensor.to_nvfp4(w, 16, per_tensor_scale=g)
    out = F.linear(a, t.dequantize(dtype))
    arrays = {"a": bits(a), "q": codes_kn(t.qdata, n, k),
              "scales": t.scale.view(torch.uint8).view(n, k // 16).t().contiguous().numpy(), "out": bits(out)}
    if g is not None:
        arrays["scales2"] = np.array([float(g)], dtype=np.float32)
    return arrays


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def gptoss_layer(t, e, topk, k, n, seed):
    """A gpt-oss-style routed GEMM (the fused gate/up projection) on t tokens, bf16."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, k, generator=gen).to(torch.bfloat16)
    logits = (torch.randn(t, e, generator=gen) * 2).to(torch.bfloat16)
    q = torch.randint(0, 16, (e, k, n), generator=gen, dtype=torch.uint8)
    sc = torch.randint(118, 124, (e, k // 32, n), generator=gen, dtype=torch.uint8)
    bias = (torch.randn(e, n, generator=gen) / 8).to(torch.bfloat16)
    # The weight: a table of the 16 e2m1 values in bf16 times 2^(c - 127) with ldexp (exact).
    lut = torch.tensor(E2M1 + [-v for v in E2M1], dtype=torch.bfloat16)
    wdq = torch.ldexp(lut[q.long()], sc.long().repeat_interleave(32, dim=1) - 127).to(torch.bfloat16)
    top, ids = torch.topk(logits, topk, dim=-1)
    rw = torch.softmax(top, dim=1, dtype=top.dtype)
    out = torch.zeros(t, n, dtype=torch.bfloat16)
    for ex in range(e):
        rows, slot = torch.where(ids == ex)
        if rows.numel() == 0:
            continue
        y = x[rows] @ wdq[ex] + bias[ex]
        out.index_add_(0, rows, (y * rw[rows, slot, None]).to(torch.bfloat16))
    return {"a": bits(x), "logits": bits(logits), "q": q.numpy(), "scales": sc.numpy(), "bias": bits(bias),
            "out": bits(out)}


def swap_nibbles(codes):
    """(K, N) codes as a reader that takes the high nibble of each byte first would see them."""
    s = codes.copy()
    s[0::2], s[1::2] = codes[1::2], codes[0::2]
    return s


def main():
    root = sys.argv[1]
    bf, f16 = torch.bfloat16, torch.float16
    mx = "w=e2m1,ws=e8m0/g32"
    nv = "w=e2m1,ws=ue4m3/g16"
    write(root, "torchao_mxfp4_bf16_m7n64k128", mx + ",a=bf16", "PASS", mx_case(7, 64, 128, bf, 1))
    write(root, "torchao_mxfp4_bf16_m33n96k256_bias", mx + ",a=bf16,bias=bf16", "PASS",
          mx_case(33, 96, 256, bf, 2, bias=True))
    write(root, "torchao_mxfp4_f16_m7n64k128", mx, "PASS", mx_case(7, 64, 128, f16, 3))
    # Block scales 2^-27..2^-25: torchao casts 2^(c - 127) to f16 before the multiply, where
    # it is 0, while the declared weight x 2^(c - 127) rounded once to f16 is not for x >= 1.
    write(root, "torchao_mxfp4_f16_tiny_scales", mx, "FAIL", mx_case(7, 64, 128, f16, 4, block_exp=-22))
    write(root, "torchao_nvfp4_bf16_m7n64k128", nv + ",a=bf16", "PASS", nv_case(7, 64, 128, bf, 5, None))
    write(root, "torchao_nvfp4_bf16_m7n64k128_g2pow", nv + ",ws2=f32/t,a=bf16", "PASS",
          nv_case(7, 64, 128, bf, 6, 0.125))
    write(root, "torchao_nvfp4_f16_m17n64k256_g2pow", nv + ",ws2=f32/t", "PASS", nv_case(17, 64, 256, f16, 7, 2.0**-9))
    # With a calibrated per-tensor scale, torchao folds it into each weight in fp32 before
    # rounding to bf16 (dq=f32); declared as NVFP4's epilogue scale it must fail.
    amax = nv_case(7, 64, 128, bf, 8, "amax")
    write(root, "torchao_nvfp4_bf16_m7n64k128_gamax", nv + ",ws2=f32/t,dq=f32,a=bf16", "PASS", amax)
    write(root, "torchao_nvfp4_bf16_m7n64k128_gamax_declared_epilogue", nv + ",ws2=f32/t,a=bf16", "FAIL", amax)
    write(root, "torchao_nvfp4_f16_m33n64k128_gamax", nv + ",ws2=f32/t,dq=f32", "PASS",
          nv_case(33, 64, 128, f16, 9, "amax"))

    ok = mx_case(7, 64, 128, bf, 10, bias=True)
    swapped = dict(ok, q=swap_nibbles(ok["q"]))
    write(root, "tamper_fp4_nibbles_swapped", mx + ",a=bf16,bias=bf16", "FAIL", swapped)
    write(root, "tamper_fp4_mx_scale_plus_one", mx + ",a=bf16,bias=bf16", "FAIL",
          dict(ok, scales=(ok["scales"] + 1).astype(np.uint8)))
    nobias = mx_case(7, 64, 128, bf, 10, bias=False)
    write(root, "tamper_fp4_bias_not_added", mx + ",a=bf16,bias=bf16", "FAIL", dict(nobias, bias=ok["bias"]))

    route = "route=topk-softmax,topk=4,logits=bf16,rw=out,sum=out"
    write(root, "moe_hf_gptoss_t23", mx + ",a=bf16,bias=bf16," + route, "PASS", gptoss_layer(23, 32, 4, 64, 64, 11))


if __name__ == "__main__":
    main()
