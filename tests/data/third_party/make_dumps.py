#!/usr/bin/env python3
"""Dumps of PyTorch's own GEMM kernels, for `qvet verify --spec SPEC`.

Runs on a CUDA host (written for an H200, sm_90, PyTorch 2.11) with torch and numpy only:

    python3 tests/data/third_party/make_dumps.py OUTDIR      write one folder per case
    python3 tests/data/third_party/make_dumps.py --measure   print the measurement tables
    python3 tests/data/third_party/make_dumps.py --selftest  CPU only: check the conversions,
                                                             the packing and the writer

Kernels: cuBLAS f16/bf16 (torch.matmul, torch.mm(out_dtype=f32), F.linear and torch.addmm with a
bias), torch._scaled_mm fp8 per tensor and per row (fast accumulation off and on, with and
without a bias), torch._int_mm, and tinygemm torch._weight_int4pack_mm with float zero points.

A case folder holds the exact operands the kernel consumed, in `qvet verify`'s conventions
(C order, little-endian): a.npy (M, K); q.npy (K, N), so C = A @ W; scales.npy, a_scale.npy,
zeros.npy, bias.npy when the spec has them; out.npy (M, N); `spec` (one line, the declared
arithmetic, docs/design.md §2) and `expect` (PASS or FAIL). bf16 is stored as '<u2' bit patterns, e4m3
as uint8 codes, u4b8 codes as uint8 0..15 (value q - 8). Cases named tamper_* hold a correct
kernel output with one thing made wrong (two output columns swapped, the channel scales reversed,
the zero points negated, the bias left out of the kernel call but declared) and must FAIL.
fp8w_* are the fp8 accumulation witnesses: one product 2^16, then K - 1 products of 1.

One line is printed per case: name, expectation, a quick max relative error against a float64
model of the spec (a hint, not a verdict), and the spec. Every kernel call runs inside its own
try/except, so an op that is unavailable or refuses a shape is reported (ERROR line) and the rest
still run. Exit status: 0 when every call ran, 1 when one failed, 2 on bad usage or without a
CUDA device. The cuBLAS cases are made with torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_
precision_reduction = False (see CudaKernels).
"""
import argparse
import math
import os
import shutil
import sys
import tempfile

from contextlib import contextmanager

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write('make_dumps.py: needs numpy and torch (%s)\n' % e)
    sys.exit(2)

SEED = 314159  # every case is drawn, in order, from one numpy Generator seeded with this

# ---------------------------------------------------------------- formats (numpy, exact)


def round_fp(x, mant):
    """RNE of float64 values to a binary format with `mant` fraction bits (bf16 7, f16 10,
    f32 23), normal range only: the callers keep magnitudes inside it."""
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    scale = np.ldexp(1.0, (mant + 1 - e).astype(np.int64))
    r = np.rint(x * scale) / scale  # x*scale is exact (power of two); rint is half-to-even
    return np.where(x == 0, 0.0, r)


def bf16_bits_to_f64(u):
    """'<u2' bf16 bit patterns -> float64."""
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def f64_to_bf16_bits(x):
    """float64 values already exact in bf16 -> '<u2' bit patterns."""
    f = np.asarray(x, dtype=np.float64).astype(np.float32)
    assert np.array_equal(f.astype(np.float64), np.asarray(x, dtype=np.float64)), "not a bf16 value"
    return (f.view(np.uint32) >> 16).astype('<u2')


def e4m3_decode(u8):
    """OCP e4m3fn codes (uint8) -> float64: bias 7, no Inf, NaN at 0x7F/0xFF."""
    u = np.asarray(u8, dtype=np.int64)
    s, e, m = (u >> 7) & 1, (u >> 3) & 0xF, u & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2((e - 7).astype(np.float64)))
    v = np.where(s == 1, -v, v)
    return np.where((e == 15) & (m == 7), np.nan, v)


def f32_frac(x):
    """A float32 value as (integer significand, exponent), exactly."""
    m, e = math.frexp(float(x))
    return int(m * (1 << 24)), e - 24


def round_int_to_f32(n, exp):
    """RNE of the exact value n * 2^exp (n a Python int) to float32, normal range."""
    if n == 0:
        return np.float32(0.0)
    neg, n = n < 0, abs(n)
    k = n.bit_length() - 24
    if k > 0:
        q, r = divmod(n, 1 << k)
        half = 1 << (k - 1)
        if r > half or (r == half and q & 1):
            q += 1
        n, exp = q, exp + k
    v = np.float32(math.ldexp(n, exp))
    return -v if neg else v


# ---------------------------------------------------------------- torch <-> qvet conventions


def to_np(t):
    """A torch tensor as qvet reads it: bf16 as '<u2' bits, e4m3 as uint8 codes."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view('<u2').copy()
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy().copy()
    return t.numpy().copy()


def bf16_from_f64(x, device):
    """float64 values exact in bf16 -> torch bf16 tensor."""
    bits = f64_to_bf16_bits(x)
    return torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16).to(device)


def e4m3_from_f64(x, device):
    """float64 values -> torch e4m3 tensor (RNE, clipped to +-448 first)."""
    x = np.clip(np.asarray(x, dtype=np.float64), -448.0, 448.0)
    return torch.from_numpy(x.astype(np.float32)).to(torch.float8_e4m3fn).to(device)


def decode(arr, fmt):
    """A dumped array in format `fmt` -> float64 values."""
    if fmt == 'bf16':
        return bf16_bits_to_f64(arr)
    if fmt == 'e4m3':
        return e4m3_decode(arr)
    if fmt == 'u4b8':
        return arr.astype(np.float64) - 8.0
    return arr.astype(np.float64)


# ---------------------------------------------------------------- tinygemm packing


def pack_int4_nk(q_nk):
    """uint8 codes (N, K) 0..15 -> the (N, K/2) uint8 input of the CUDA
    torch._convert_weight_to_int4pack: byte j of row n = q[n, 2j] << 4 | q[n, 2j+1]
    (even k in the high nibble)."""
    q = np.asarray(q_nk, dtype=np.uint8)
    assert q.ndim == 2 and q.shape[1] % 2 == 0 and q.max() < 16
    return ((q[:, 0::2] << 4) | q[:, 1::2]).astype(np.uint8)


def emulate_cuda_int4pack(packed_nk2, inner_k_tiles):
    """The CUDA packer (matrix_to_m16n8k16_Bint4_layout) on the host: (N, K/2) uint8 ->
    int32 [ceil(N/8)][K/(ikt*16)][32][ikt/2]. Used only by --selftest, with the reader below,
    to check that pack_int4_nk puts every code where the m16n8k16 B fragment reads it."""
    n, kh = packed_nk2.shape
    k = kh * 2
    n_tiles, k_super = -(-n // 8), k // (inner_k_tiles * 16)
    out = np.zeros((n_tiles, k_super, 32, inner_k_tiles // 2), dtype=np.uint32)
    for nt in range(n_tiles):
        for ko in range(k_super):
            for t in range(32):
                n0 = nt * 8 + t // 4
                for ik in range(0, inner_k_tiles, 2):
                    base = (ko * inner_k_tiles + ik) * 16 // 2
                    ks = [base + t % 4, base + t % 4 + 4, base + 8 + t % 4, base + 8 + t % 4 + 4]
                    v = [int(packed_nk2[n0, kk]) if n0 < n and kk < kh else 0 for kk in ks]
                    word = 0
                    for i in range(4):
                        word |= (v[i] & 0xF) << (16 + 4 * i)
                        word |= ((v[i] & 0xF0) >> 4) << (4 * i)
                    out[nt, ko, t, ik // 2] = word
    return out


def emulate_cuda_int4_reader(packed, n, k, inner_k_tiles):
    """The tinygemm kernel's B load on the host: int4 codes back as (N, K), from the lane ->
    (n, k) map of the m16n8k16 B fragment (b0: k = 2(t%4), +1; b1: the same + 8; n = t/4) and
    the nibble order of convert_i4x8_to_bf16x2x4 (pair i = nibbles i and i+4, low half first)."""
    q = np.full((n, k), -1, dtype=np.int64)
    for nt in range(packed.shape[0]):
        for ko in range(packed.shape[1]):
            for t in range(32):
                nn = nt * 8 + t // 4
                for j in range(inner_k_tiles // 2):
                    word = int(packed[nt, ko, t, j])
                    pairs = [((word >> (4 * i)) & 0xF, (word >> (4 * i + 16)) & 0xF) for i in range(4)]
                    for kk in range(2):
                        kt = ko * inner_k_tiles + 2 * j + kk
                        for reg in range(2):
                            lo, hi = pairs[kk * 2 + reg]
                            k0 = kt * 16 + 8 * reg + 2 * (t % 4)
                            if nn < n:
                                q[nn, k0], q[nn, k0 + 1] = lo, hi
    return q


# ---------------------------------------------------------------- random data


def log_uniform(rng, shape, lo, hi, mant):
    """Positive values 2^U(lo, hi) rounded to a format with `mant` fraction bits, distinct along
    the last axis (so no channel, group or token repeats its neighbour's scale)."""
    v = round_fp(2.0 ** rng.uniform(lo, hi, size=shape), mant).reshape(-1, shape[-1])
    for row in v:
        for _ in range(100):
            _, idx = np.unique(row, return_index=True)
            dup = np.setdiff1d(np.arange(row.size), idx)
            if dup.size == 0:
                break
            row[dup] = round_fp(2.0 ** rng.uniform(lo, hi, size=dup.size), mant)
    return v.reshape(shape)


# ---------------------------------------------------------------- kernels


class CudaKernels:
    """The PyTorch calls under test. Every method takes and returns torch tensors."""

    device = 'cuda'

    def __init__(self):
        m = torch.backends.cuda.matmul
        # cuBLAS may otherwise reduce split-K partials in fp16/bf16, which grammar v1 cannot
        # declare (red has f32 and none only); fp16 accumulation is off by default, made sure.
        m.allow_fp16_reduced_precision_reduction = False
        m.allow_bf16_reduced_precision_reduction = False
        if hasattr(m, 'allow_fp16_accumulation'):
            m.allow_fp16_accumulation = False

    def matmul(self, a, w_kn):
        return torch.matmul(a, w_kn)

    def mm_out(self, a, w_kn, out_dtype):
        return torch.mm(a, w_kn, out_dtype=out_dtype)

    def linear(self, x, w_nk, bias):
        return F.linear(x, w_nk, bias)

    def addmm(self, bias, x, w_kn):
        return torch.addmm(bias, x, w_kn)

    def scaled_mm(self, a, w_nk, sa, sb, out_dtype, fast, bias=None):
        # mat2 must be column-major on sm_90: the transposed view of the (N, K) weight
        return torch._scaled_mm(a, w_nk.t(), scale_a=sa, scale_b=sb, bias=bias,
                                out_dtype=out_dtype, use_fast_accum=fast)

    def int_mm(self, a, w_nk):
        return torch._int_mm(a, w_nk.t())

    def int4_mm(self, a, q_nk, group, sz, inner_k_tiles):
        packed = torch.from_numpy(pack_int4_nk(to_np(q_nk))).to(self.device)
        b = torch._convert_weight_to_int4pack(packed, inner_k_tiles)
        return torch._weight_int4pack_mm(a, b, group, sz)

    def sync(self):
        torch.cuda.synchronize()


class StandinKernels(CudaKernels):
    """CPU stand-ins for --selftest: float64 models of the declared arithmetic, so the writer,
    the conventions and the tamper logic can be exercised without a GPU. Never used for dumps."""

    device = 'cpu'

    def __init__(self):
        pass

    @staticmethod
    def _f64(t):
        return t.detach().to(torch.float64)

    def matmul(self, a, w_kn):
        return (self._f64(a) @ self._f64(w_kn)).to(a.dtype)

    def mm_out(self, a, w_kn, out_dtype):
        return (self._f64(a) @ self._f64(w_kn)).to(out_dtype)

    def linear(self, x, w_nk, bias):
        y = self._f64(x) @ self._f64(w_nk).t()
        return (y if bias is None else y + self._f64(bias)).to(x.dtype)

    def addmm(self, bias, x, w_kn):
        return (self._f64(bias) + self._f64(x) @ self._f64(w_kn)).to(x.dtype)

    def scaled_mm(self, a, w_nk, sa, sb, out_dtype, fast, bias=None):
        y = (self._f64(a) @ self._f64(w_nk).t()) * self._f64(sa) * self._f64(sb)
        return (y if bias is None else y + self._f64(bias)).to(out_dtype)

    def int_mm(self, a, w_nk):
        return (a.to(torch.int64) @ w_nk.to(torch.int64).t()).to(torch.int32)

    def int4_mm(self, a, q_nk, group, sz, inner_k_tiles):
        q = q_nk.to(torch.float64).t() - 8.0                       # (K, N)
        s = self._f64(sz[:, :, 0]).repeat_interleave(group, dim=0)
        z = self._f64(sz[:, :, 1]).repeat_interleave(group, dim=0)
        w = torch.from_numpy(round_fp((q * s + z).numpy(), 7))
        return (self._f64(a) @ w).to(torch.bfloat16)

    def sync(self):
        pass


# ---------------------------------------------------------------- case writing


def reference(arrays, spec):
    """float64 model of the declared arithmetic from the dumped arrays (for the printed hint)."""
    kv = dict(p.split('=', 1) for p in spec.split(','))
    a = decode(arrays['a'], kv.get('a', 'f16'))
    w = decode(arrays['q'], kv['w'])
    ws, wz = kv.get('ws', 'none'), kv.get('wz', 'none')
    if ws != 'none':
        fmt, gran = ws.split('/')
        s = decode(arrays['scales'], fmt)
        if gran.startswith('g'):
            g = int(gran[1:])
            s = np.repeat(s, g, axis=0)
            if wz.startswith('float/'):
                z = np.repeat(decode(arrays['zeros'], fmt), g, axis=0)
                w = round_fp(w * s + z, 7 if fmt == 'bf16' else 10)
            else:
                w = w * s
        else:
            w = w * s
    if kv.get('as', 'none') != 'none':
        a = a * arrays['a_scale'].astype(np.float64).reshape(-1, 1)
    y = a @ w
    if kv.get('bias', 'none') != 'none':
        y = y + decode(arrays['bias'], kv['bias'])
    return y


class Writer:
    def __init__(self, outdir, kernels):
        self.outdir, self.k, self.count, self.bytes = outdir, kernels, 0, 0
        self.rng = np.random.default_rng(SEED)
        self.errors = []

    @contextmanager
    def guard(self, label):
        """Runs one case (or a group of cases on the same operands): an op that refuses this
        shape or dtype is reported and the next case still runs."""
        try:
            yield
        except Exception as e:
            self.errors.append(label)
            print('ERROR %s: %s: %s' % (label, type(e).__name__, str(e).strip().splitlines()[0][:200]))

    def case(self, name, spec, expect, arrays, note=''):
        """Write one case folder; arrays maps a file stem to a numpy array."""
        assert expect in ('PASS', 'FAIL')
        d = os.path.join(self.outdir, name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for stem, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            assert arr.dtype.byteorder in ('<', '|', '=') and sys.byteorder == 'little'
            np.save(os.path.join(d, stem + '.npy'), arr)
        for fname, text in (('spec', spec), ('expect', expect)):
            with open(os.path.join(d, fname), 'w') as f:
                f.write(text + '\n')
        self.bytes += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        self.count += 1
        out = arrays['out']
        if out.dtype.kind in 'iu' and spec.find('out=i32') >= 0:
            err = float(np.max(np.abs(out.astype(np.int64) - reference(arrays, spec))))
            hint = 'maxabs=%g' % err
        else:
            y = reference(arrays, spec)
            o = decode(out, 'bf16' if out.dtype == np.uint16 else 'f')
            hint = 'maxrel=%.2e' % (np.max(np.abs(o - y)) / max(np.max(np.abs(y)), 1e-30))
        print('%-46s %s  %-16s %s%s' % (name, expect, hint, spec, ('  # ' + note) if note else ''))
        sys.stdout.flush()

    def swapped(self, out):
        """A copy of out with two columns swapped: column 0 and the one that differs most."""
        o = decode(out, 'bf16' if out.dtype == np.uint16 else 'f')
        j = int(np.argmax(np.max(np.abs(o - o[:, :1]), axis=0)))
        assert j != 0 and np.max(np.abs(o[:, j] - o[:, 0])) > 0
        t = out.copy()
        t[:, [0, j]] = t[:, [j, 0]]
        return t


# ---------------------------------------------------------------- families
#
# A family draws its operands from the Writer's generator, calls the kernel, and writes the
# cases of that call. Each call runs under Writer.guard, so a shape or dtype the op refuses is
# reported and the rest still run.

OUT_DTYPE = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}


def shape_name(m, n, k):
    return 'm%dn%dk%d' % (m, n, k)


def f32_tensor(x, dev):
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dev)


def half_tensor(x, fmt, dev):
    """float64 values exact in fmt ('f16' or 'bf16') -> torch tensor."""
    if fmt == 'f16':
        return torch.from_numpy(np.asarray(x, dtype=np.float64).astype(np.float16)).to(dev)
    return bf16_from_f64(x, dev)


def family_cublas(w):
    """cuBLAS f16/bf16 through torch.matmul, torch.mm(out_dtype=f32), F.linear, torch.addmm.
    M = 1 takes the cublasGemmEx beta=1 bias path, M > 1 the cuBLASLt bias epilogue."""
    for fmt, mant in (('f16', 10), ('bf16', 7)):
        for shp in ((1, 64, 128), (7, 64, 192), (33, 96, 128)):
            m, n, k = shp
            a = half_tensor(round_fp(w.rng.standard_normal((m, k)), mant), fmt, w.k.device)
            w_kn = half_tensor(round_fp(w.rng.standard_normal((k, n)) / math.sqrt(k), mant), fmt,
                               w.k.device)
            bias = half_tensor(round_fp(w.rng.standard_normal(n), mant), fmt, w.k.device)
            with w.guard('cublas_%s_%s' % (fmt, shape_name(*shp))):
                cublas_cases(w, fmt, shp, a, w_kn, bias)


def cublas_cases(w, fmt, shp, a, w_kn, bias):
    m, n, k = shp
    tag = '%s_%s' % (fmt, shape_name(m, n, k))
    base = {'a': to_np(a), 'q': to_np(w_kn)}
    spec = 'w=%s,a=%s' % (fmt, fmt)
    out = to_np(w.k.matmul(a, w_kn))
    w.case('cublas_' + tag, spec, 'PASS', dict(base, out=out), 'torch.matmul')
    if m == 7:
        w.case('tamper_cublas_%s_swapcols' % tag, spec, 'FAIL', dict(base, out=w.swapped(out)),
               'two output columns swapped')
        try:
            o32 = to_np(w.k.mm_out(a, w_kn, torch.float32))
        except Exception as e:  # the mm.dtype overload is recent
            print('SKIP cublas_%s_outf32: %s' % (tag, str(e).strip().splitlines()[0][:120]))
        else:
            w.case('cublas_%s_outf32' % tag, spec + ',out=f32', 'PASS', dict(base, out=o32),
                   'torch.mm(out_dtype=float32)')
    bspec = 'w=%s,a=%s,bias=%s' % (fmt, fmt, fmt)
    if m == 33:
        ob, how = to_np(w.k.addmm(bias, a, w_kn)), 'torch.addmm, cuBLASLt bias epilogue'
    else:
        ob = to_np(w.k.linear(a, w_kn.t().contiguous(), bias))
        how = 'F.linear, ' + ('cublasGemmEx beta=1 (M=1)' if m == 1 else 'cuBLASLt bias epilogue')
    bbase = dict(base, bias=to_np(bias))
    w.case('cublas_%s_bias' % tag, bspec, 'PASS', dict(bbase, out=ob), how)
    if (fmt, m) in (('f16', 7), ('bf16', 1)):
        w.case('tamper_cublas_%s_nobias' % tag, bspec, 'FAIL', dict(bbase, out=out),
               'kernel called without the bias')


FP8_SHAPES = [(1, 64, 256), (7, 128, 128), (33, 128, 128)]


def fp8_operands(rng, m, n, k, dev):
    """Random e4m3 A (M, K) and W (N, K) with many distinct codes."""
    a = e4m3_from_f64(rng.standard_normal((m, k)) * 2.0, dev)
    w_nk = e4m3_from_f64(rng.standard_normal((n, k)) * 2.0, dev)
    return a, w_nk


def family_scaled_mm(w, kind):
    """torch._scaled_mm, e4m3 x e4m3: kind 'tw' = scalar f32 scales, 'rw' = scale_a (M, 1) and
    scale_b (1, N). Runs are (out format, shape, use_fast_accum, with bias)."""
    s0, s1, s2 = FP8_SHAPES
    runs = [('bf16', s0, False, False), ('bf16', s1, False, False), ('bf16', s2, False, False),
            ('bf16', s0, True, False), ('bf16', s2, True, False),
            ('f16', s1, False, False), ('f16', s2, True, False),
            ('f32', s0, False, False), ('f32', s1, True, False),
            ('bf16', s1, False, True), ('bf16', s2, True, True), ('f16', s0, False, True)]
    for run in runs:
        with w.guard('scaled_%s %s' % (kind, run)):
            scaled_mm_case(w, kind, *run)


def scaled_mm_case(w, kind, out_fmt, shp, fast, with_bias):
    m, n, k = shp
    rng, dev = w.rng, w.k.device
    a, w_nk = fp8_operands(rng, m, n, k, dev)
    if kind == 'tw':
        s = log_uniform(rng, (2,), -3, 3, 23)
        sa_np, sb_np = np.full((m, 1), s[0]), np.full((1, n), s[1])
        sa, sb = f32_tensor(s[0], dev), f32_tensor(s[1], dev)
        arrays = {'scales': np.array([[s[1]]], np.float32), 'a_scale': np.array([s[0]], np.float32)}
        gran = 'ws=f32/t,a=e4m3,as=f32/t'
    else:
        sa_np = log_uniform(rng, (1, m), -6, 2, 23).T.copy()  # distinct along the tokens
        sb_np = log_uniform(rng, (1, n), -6, 2, 23)
        sa, sb = f32_tensor(sa_np, dev), f32_tensor(sb_np, dev)
        arrays = {'scales': sb_np.astype(np.float32), 'a_scale': sa_np.astype(np.float32)}
        gran = 'ws=f32/c,a=e4m3,as=f32/tok'
    arrays.update(a=to_np(a), q=to_np(w_nk).T.copy())
    bias = None
    if with_bias:
        # per column, of the size of that column's outputs, so leaving it out shows everywhere
        b = rng.standard_normal(n) * 40.0 * np.median(sa_np) * sb_np[0]
        bias = half_tensor(round_fp(b, 7 if out_fmt == 'bf16' else 10), out_fmt, dev)
        arrays['bias'] = to_np(bias)
    spec = 'w=e4m3,%s,acc=%s%s,out=%s' % (gran, 'f8fast' if fast else 'f8p128',
                                          ',bias=' + out_fmt if with_bias else '', out_fmt)
    out = to_np(w.k.scaled_mm(a, w_nk, sa, sb, OUT_DTYPE[out_fmt], fast, bias))
    name = 'scaled_%s_%s%s%s_%s' % (kind, out_fmt, '_fast' if fast else '',
                                    '_bias' if with_bias else '', shape_name(m, n, k))
    w.case(name, spec, 'PASS', dict(arrays, out=out))
    if out_fmt != 'bf16' or fast:
        return
    if with_bias:
        nob = to_np(w.k.scaled_mm(a, w_nk, sa, sb, OUT_DTYPE[out_fmt], fast, None))
        w.case('tamper_%s_nobias' % name, spec, 'FAIL', dict(arrays, out=nob),
               'kernel called without the bias')
    elif m == 7:
        w.case('tamper_%s_swapcols' % name, spec, 'FAIL', dict(arrays, out=w.swapped(out)),
               'two output columns swapped')
        if kind == 'rw':
            w.case('tamper_%s_revscales' % name, spec, 'FAIL',
                   dict(arrays, scales=arrays['scales'][:, ::-1].copy(), out=out),
                   'channel scales reversed in scales.npy')


def family_scaled_tensorwise(w):
    family_scaled_mm(w, 'tw')


def family_scaled_rowwise(w):
    family_scaled_mm(w, 'rw')


def witness_operands(m, n, k, dev, big=(256.0, 256.0), small=(1.0, 1.0)):
    """e4m3 A (M, K), W (N, K): the product at k = 0 is big[0]*big[1], every other one
    small[0]*small[1]."""
    a = np.full((m, k), small[0])
    wn = np.full((n, k), small[1])
    a[:, 0], wn[:, 0] = big
    return e4m3_from_f64(a, dev), e4m3_from_f64(wn, dev)


def family_witness(w):
    """fp8 precision witness: one product 2^16 then K - 1 products of 1 (256 = 2^8 is an e4m3
    code), unit scales, f32 out. The promoted path must fit acc=f8p128; fast accumulation must
    fail it and fit acc=f8fast."""
    dev = w.k.device
    for kind, ks in (('tw', (1024, 8192)), ('rw', (1024,))):
        for k in ks:
            with w.guard('fp8w_%s_k%d' % (kind, k)):
                witness_cases(w, kind, k, dev)


def witness_cases(w, kind, k, dev):
    m, n = (8, 16) if k <= 1024 else (2, 16)  # keeps the K = 8192 dumps small
    a, w_nk = witness_operands(m, n, k, dev)
    if kind == 'tw':
        sa = sb = f32_tensor(1.0, dev)
        scales = {'scales': np.ones((1, 1), np.float32), 'a_scale': np.ones(1, np.float32)}
        gran = 'ws=f32/t,a=e4m3,as=f32/t'
    else:
        sa, sb = f32_tensor(np.ones((m, 1)), dev), f32_tensor(np.ones((1, n)), dev)
        scales = {'scales': np.ones((1, n), np.float32), 'a_scale': np.ones((m, 1), np.float32)}
        gran = 'ws=f32/c,a=e4m3,as=f32/tok'
    base = dict(scales, a=to_np(a), q=to_np(w_nk).T.copy())
    exact = 65536.0 + k - 1
    for fast in (False, True):
        out = to_np(w.k.scaled_mm(a, w_nk, sa, sb, torch.float32, fast))
        note = 'got %.0f, exact %.0f, lost %.0f' % (out[0, 0], exact, exact - out[0, 0])
        tag = 'fp8w_%s_k%d_%s' % (kind, k, 'fast' if fast else 'prom')
        spec = 'w=e4m3,' + gran + ',acc=%s,out=f32'
        w.case(tag + '_f8p128', spec % 'f8p128', 'FAIL' if fast else 'PASS', dict(base, out=out), note)
        if fast:
            w.case(tag + '_f8fast', spec % 'f8fast', 'PASS', dict(base, out=out), note)


def family_int_mm(w):
    """torch._int_mm: int8 x int8 -> int32 (cuBLASLt, COMPUTE_32I); M > 16, K and N % 8."""
    spec = 'w=i8,a=i8,acc=i32,out=i32'
    for m, n, k in ((17, 64, 128), (33, 128, 128), (48, 64, 384)):
        a = torch.from_numpy(w.rng.integers(-128, 128, (m, k), dtype=np.int8)).to(w.k.device)
        w_nk = torch.from_numpy(w.rng.integers(-128, 128, (n, k), dtype=np.int8)).to(w.k.device)
        with w.guard('int_mm_%s' % shape_name(m, n, k)):
            base = {'a': to_np(a), 'q': to_np(w_nk).T.copy()}
            out = to_np(w.k.int_mm(a, w_nk))
            w.case('int_mm_%s' % shape_name(m, n, k), spec, 'PASS', dict(base, out=out))
            if m == 33:
                w.case('tamper_int_mm_%s_swapcols' % shape_name(m, n, k), spec, 'FAIL',
                       dict(base, out=w.swapped(out)), 'two output columns swapped')


def tinygemm_operands(rng, m, n, k, g, dev):
    """bf16 A (M, K); codes (N, K); bf16 scales and float zero points (K/G, N), nonzero.
    Returns A, codes, scales, zeros (float64) and qScaleAndZeros (K/G, N, 2) bf16."""
    a = bf16_from_f64(round_fp(rng.standard_normal((m, k)), 7), dev)
    q_nk = rng.integers(0, 16, (n, k), dtype=np.uint8)
    s = log_uniform(rng, (k // g, n), -8, 0, 7)
    z = round_fp(s * rng.uniform(-8.0, 8.0, s.shape), 7)
    z = np.where(np.abs(z) < s / 64, s / 4, z)  # nonzero and not negligible (s/4 is exact)
    return a, q_nk, s, z, bf16_from_f64(np.stack([s, z], axis=-1), dev)


def family_tinygemm(w):
    """torch._weight_int4pack_mm: bf16 A, int4 codes, bf16 scale and zero point per group;
    runs are (M, N, K, group, innerKTiles)."""
    for m, n, k, g, ikt in ((1, 64, 128, 32, 2), (7, 64, 384, 128, 8), (33, 256, 192, 64, 4),
                            (7, 64, 512, 256, 8)):
        a, q_nk, s, z, sz = tinygemm_operands(w.rng, m, n, k, g, w.k.device)
        name = 'tinygemm_g%d_%s' % (g, shape_name(m, n, k))
        with w.guard(name):
            spec = 'w=u4b8,ws=bf16/g%d,wz=float/g%d,dq=rn,a=bf16' % (g, g)
            base = {'a': to_np(a), 'q': q_nk.T.copy(), 'scales': f64_to_bf16_bits(s),
                    'zeros': f64_to_bf16_bits(z)}
            out = to_np(w.k.int4_mm(a, torch.from_numpy(q_nk), g, sz, ikt))
            w.case(name, spec, 'PASS', dict(base, out=out), 'innerKTiles=%d' % ikt)
            if g == 128:
                w.case('tamper_%s_revscales' % name, spec, 'FAIL',
                       dict(base, scales=base['scales'][:, ::-1].copy(), out=out),
                       'group scales reversed along N in scales.npy')
                w.case('tamper_%s_negzeros' % name, spec, 'FAIL',
                       dict(base, zeros=base['zeros'] ^ np.uint16(0x8000), out=out),
                       'zero points of the wrong sign in zeros.npy')
                w.case('tamper_%s_swapcols' % name, spec, 'FAIL', dict(base, out=w.swapped(out)),
                       'two output columns swapped')


FAMILIES = [('cublas', family_cublas), ('scaled_mm tensorwise', family_scaled_tensorwise),
            ('scaled_mm rowwise', family_scaled_rowwise), ('fp8 witness', family_witness),
            ('int_mm', family_int_mm), ('tinygemm', family_tinygemm)]


def run_families(w):
    """Runs every family; returns the labels of those with a refused or failed call."""
    failed = []
    for label, fn in FAMILIES:
        errors = len(w.errors)
        try:
            fn(w)
        except Exception as e:  # one unavailable op must not stop the other families
            w.errors.append(label)
            print('ERROR family %s: %s: %s' % (label, type(e).__name__,
                                               str(e).strip().splitlines()[0][:200]))
        if len(w.errors) > errors:
            failed.append(label)
    return failed


# ---------------------------------------------------------------- environment


def blas_libraries():
    """The cuBLAS and cuBLASLt files this process has loaded, with cublasLtGetVersion()."""
    import ctypes
    found = {}
    try:
        with open('/proc/self/maps') as f:
            for line in f:
                path = line.split()[-1]
                for lib in ('libcublas.so', 'libcublasLt.so'):
                    if os.path.basename(path).startswith(lib):
                        found.setdefault(lib, path)
        text = ', '.join(os.path.basename(p) for p in found.values()) or '?'
        if 'libcublasLt.so' in found:
            text += ' (cublasLtGetVersion %d)' % ctypes.CDLL(found['libcublasLt.so']).cublasLtGetVersion()
        return text
    except Exception as e:
        return '? (%s)' % e


def environment(kernels):
    lines = ['torch %s, CUDA %s, numpy %s' % (torch.__version__, torch.version.cuda, np.__version__)]
    if kernels.device == 'cuda':
        torch.ones(2, 2, device='cuda') @ torch.ones(2, 2, device='cuda')  # loads cuBLAS
        torch.cuda.synchronize()
        p = torch.cuda.get_device_properties(0)
        lines.append('device %s, sm_%d%d, %d SMs' % (p.name, p.major, p.minor, p.multi_processor_count))
        lines.append('cuBLAS libraries loaded: %s' % blas_libraries())
        lines.append('preferred BLAS backend: %s' % torch.backends.cuda.preferred_blas_library())
    lines.append('seed %d' % SEED)
    return lines


# ---------------------------------------------------------------- --measure


def measure_kernel_names(K_):
    print('\n## Kernels launched (torch.profiler, CUDA activity)')
    from torch.profiler import profile, ProfilerActivity
    dev = K_.device
    h = torch.randn(64, 256, device=dev, dtype=torch.float16)
    wh = torch.randn(256, 128, device=dev, dtype=torch.float16)
    bh = torch.randn(128, device=dev, dtype=torch.float16)
    a8, w8 = fp8_operands(np.random.default_rng(1), 64, 128, 256, dev)
    one = f32_tensor(1.0, dev)
    sa, sb = f32_tensor(np.ones((64, 1)), dev), f32_tensor(np.ones((1, 128)), dev)
    i8 = torch.randint(-8, 8, (64, 256), dtype=torch.int8, device=dev)
    iw = torch.randint(-8, 8, (128, 256), dtype=torch.int8, device=dev)
    ta, tq, _, _, tsz = tinygemm_operands(np.random.default_rng(2), 16, 128, 256, 128, dev)
    calls = [
        ('torch.matmul f16', lambda: K_.matmul(h, wh)),
        ('F.linear f16 + bias, M=64 (Lt)', lambda: K_.linear(h, wh.t(), bh)),
        ('F.linear f16 + bias, M=1', lambda: K_.linear(h[:1], wh.t(), bh)),
        ('_scaled_mm tensorwise', lambda: K_.scaled_mm(a8, w8, one, one, torch.bfloat16, False)),
        ('_scaled_mm tensorwise fast', lambda: K_.scaled_mm(a8, w8, one, one, torch.bfloat16, True)),
        ('_scaled_mm rowwise', lambda: K_.scaled_mm(a8, w8, sa, sb, torch.bfloat16, False)),
        ('_scaled_mm rowwise fast', lambda: K_.scaled_mm(a8, w8, sa, sb, torch.bfloat16, True)),
        ('_int_mm', lambda: K_.int_mm(i8, iw)),
        ('_weight_int4pack_mm', lambda: K_.int4_mm(ta, torch.from_numpy(tq), 128, tsz, 8)),
    ]
    for label, fn in calls:
        try:
            fn()
            K_.sync()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                K_.sync()
            names = sorted({e.name for e in prof.events()
                            if str(getattr(e, 'device_type', '')).endswith('CUDA')})
            print('%-34s %s' % (label, ' | '.join(names) if names else '(none seen)'))
        except Exception as e:
            print('%-34s unavailable: %s' % (label, str(e).splitlines()[0][:160]))


def measure_fp8_accumulation(K_):
    print('\n## fp8 accumulation: one product 2^e, then K-1 products of `small` (unit scales, f32 out)')
    print('loss = exact - got, in units of the small product\'s unit u (u = 1 for e <= 16, else 2^(16-e)).')
    print('Read: the e where K=128 losses start gives the accumulator width; small=5 separates')
    print('truncation from rounding; K=256/1024 equal to K=128 means a restart every 128 K (promotion).')
    dev = K_.device
    one = f32_tensor(1.0, dev)
    print('%3s %5s %5s %12s %12s' % ('e', 'small', 'K', 'promoted', 'fast'))
    for e in range(10, 19):
        if e <= 16:
            b0 = 2.0 ** math.ceil(e / 2)
            big, unit = (b0, 2.0 ** e / b0), 1.0
        else:
            big, unit = (256.0, 256.0), 2.0 ** (16 - e)
        for small in (1.0, 5.0):
            for k in (128, 256, 1024):
                a, w_nk = witness_operands(16, 16, k, dev, big=big, small=(small, unit))
                exact = big[0] * big[1] + (k - 1) * small * unit
                loss = []
                for fast in (False, True):
                    out = to_np(K_.scaled_mm(a, w_nk, one, one, torch.float32, fast))
                    loss.append((exact - float(out[0, 0])) / unit)
                print('%3d %5g %5d %12g %12g' % (e, small, k, loss[0], loss[1]))


def measure_scale_order(K_):
    print('\n## Epilogue scale order (f32 out; small-integer operands, so the accumulator is exact)')
    dev = K_.device
    rng = np.random.default_rng(3)
    m, n, k = 16, 16, 32
    a_np = rng.integers(-3, 4, (m, k)).astype(np.float64)
    w_np = rng.integers(-3, 4, (n, k)).astype(np.float64)
    acc = a_np @ w_np.T
    a, w_nk = e4m3_from_f64(a_np, dev), e4m3_from_f64(w_np, dev)
    for kind in ('tensorwise', 'rowwise'):
        if kind == 'tensorwise':
            sa_np = np.full((m, 1), np.float32(1 + rng.random()) * np.float32(0.37), np.float32)
            sb_np = np.full((1, n), np.float32(1 + rng.random()) * np.float32(2.9), np.float32)
            sa, sb = f32_tensor(sa_np[0, 0], dev), f32_tensor(sb_np[0, 0], dev)
        else:
            sa_np = (1 + rng.random((m, 1))).astype(np.float32)
            sb_np = (1 + rng.random((1, n))).astype(np.float32)
            sa, sb = f32_tensor(sa_np, dev), f32_tensor(sb_np, dev)
        for fast in (False, True):
            try:
                out = to_np(K_.scaled_mm(a, w_nk, sa, sb, torch.float32, fast))
            except Exception as e:
                print('%s: unavailable: %s' % (kind, str(e).splitlines()[0][:160]))
                continue
            acc32 = acc.astype(np.float32)
            models = {
                'RN(acc*RN(sa*sb))': acc32 * (sa_np * sb_np),
                'RN(RN(acc*sa)*sb)': (acc32 * sa_np) * sb_np,
                'RN(RN(acc*sb)*sa)': (acc32 * sb_np) * sa_np,
            }
            exact = np.empty((m, n), np.float32)
            for i in range(m):
                for j in range(n):
                    ma, ea = f32_frac(sa_np[i, 0])
                    mb, eb = f32_frac(sb_np[0, j])
                    exact[i, j] = round_int_to_f32(int(acc[i, j]) * ma * mb, ea + eb)
            models['RN(acc*sa*sb) exact'] = exact
            res = ', '.join('%s %d/%d' % (name, int(np.sum(v.astype(np.float32) == out)), m * n)
                            for name, v in models.items())
            print('%-10s fast=%d: %s' % (kind, fast, res))


def measure_bias_rounding(K_):
    print('\n## Output rounding and bias: one rounding after an fp32 bias add?')
    print('acc = 1 + t; with bias b: single rounding gives RNE(1 + t + b), double gives RNE(RNE(1+t) + b).')
    dev = K_.device
    rows = []
    for fmt, tdt, mant in (('f16', torch.float16, 10), ('bf16', torch.bfloat16, 7)):
        ulp = 2.0 ** -mant
        for t_mult, b_mult in ((0.5, 0.0), (1.5, 0.0), (0.5, 0.25)):
            t, b = t_mult * ulp, b_mult * ulp
            want = round_fp(1.0 + t + b, mant)
            for m in (1, 2):
                x = np.zeros((m, 16))
                x[:, 0], x[:, 1] = 1.0, t
                wnk = np.zeros((16, 16))
                wnk[:, 0] = wnk[:, 1] = 1.0
                mk = ((lambda v: torch.from_numpy(v.astype(np.float16)).to(dev)) if fmt == 'f16'
                      else (lambda v: bf16_from_f64(v, dev)))
                if b_mult:
                    got = K_.linear(mk(x), mk(wnk), mk(np.full(16, b)))
                    path = 'F.linear ' + ('(beta=1 path)' if m == 1 else '(Lt bias epilogue)')
                else:
                    got = K_.matmul(mk(x), mk(wnk).t())
                    path = 'torch.matmul'
                g = float(got[0, 0].float())
                rows.append((fmt, path, 'M=%d' % m, t_mult, b_mult, g, float(want)))
        # _scaled_mm: 1*1 + a1*b1 = 1 + t with e4m3 operands; bias in the output format
        for t_mult, b_mult in ((0.5, 0.0), (1.5, 0.0), (0.5, 0.25)):
            t, b = t_mult * ulp, b_mult * ulp
            a1, b1 = (t, 1.0) if fmt == 'bf16' else (t * 4.0, 0.25)
            want = round_fp(1.0 + t + b, mant)
            for kind in ('tensorwise', 'rowwise'):
                x = np.zeros((16, 16))
                x[:, 0], x[:, 1] = 1.0, a1
                wnk = np.zeros((16, 16))
                wnk[:, 0], wnk[:, 1] = 1.0, b1
                if kind == 'tensorwise':
                    sa = sb = f32_tensor(1.0, dev)
                else:
                    sa, sb = f32_tensor(np.ones((16, 1)), dev), f32_tensor(np.ones((1, 16)), dev)
                bias = None
                if b_mult:
                    bv = np.full(16, b)
                    bias = (torch.from_numpy(bv.astype(np.float16)).to(dev) if fmt == 'f16'
                            else bf16_from_f64(bv, dev))
                try:
                    got = K_.scaled_mm(e4m3_from_f64(x, dev), e4m3_from_f64(wnk, dev), sa, sb, tdt, False, bias)
                    g = float(got[0, 0].float())
                except Exception as e:
                    g = float('nan')
                    print('  %s %s: unavailable: %s' % (fmt, kind, str(e).splitlines()[0][:120]))
                rows.append((fmt, '_scaled_mm ' + kind, 'M=16', t_mult, b_mult, g, float(want)))
    print('%-5s %-32s %-5s %6s %6s %-22s %-22s %s' % ('out', 'path', 'M', 't/ulp', 'b/ulp', 'got', 'RNE single', 'verdict'))
    for fmt, path, m, tm, bm, g, want in rows:
        print('%-5s %-32s %-5s %6g %6g %-22r %-22r %s' % (fmt, path, m, tm, bm, g, want,
                                                       'ok' if g == want else 'DIFFERS'))


def measure_tinygemm_dequant(K_):
    print('\n## tinygemm dequantization rounding (one-hot A = I, so out = the dequantized weights)')
    dev = K_.device
    rng = np.random.default_rng(4)
    k, n, g = 128, 64, 32
    q_nk = rng.integers(0, 16, (n, k), dtype=np.uint8)
    s = round_fp((1 + rng.random((k // g, n))) * 2.0 ** rng.integers(-4, 0, (k // g, n)), 7)
    z = round_fp(s * rng.uniform(-8, 8, s.shape) * (1 + rng.random(s.shape)), 7)
    sz = bf16_from_f64(np.stack([s, z], axis=-1), dev)
    a = bf16_from_f64(np.eye(k), dev)
    out = bf16_bits_to_f64(to_np(K_.int4_mm(a, torch.from_numpy(q_nk), g, sz, 2)))   # (K, N)
    qv = q_nk.T.astype(np.float64) - 8.0
    S, Z = np.repeat(s, g, axis=0), np.repeat(z, g, axis=0)
    models = {
        'dq=rn   RN(q*s + z), one FMA': round_fp(qv * S + Z, 7),
        'dq=rn2  RN(RN(q*s) + z)': round_fp(round_fp(qv * S, 7) + Z, 7),
    }
    for name, v in models.items():
        print('%-40s matches %d/%d' % (name, int(np.sum(v == out)), out.size))
    diff = models['dq=rn   RN(q*s + z), one FMA'] != models['dq=rn2  RN(RN(q*s) + z)']
    print('elements where rn and rn2 differ: %d; of those, kernel = rn: %d, = rn2: %d' % (
        int(diff.sum()), int(np.sum(diff & (out == models['dq=rn   RN(q*s + z), one FMA']))),
        int(np.sum(diff & (out == models['dq=rn2  RN(RN(q*s) + z)'])))))


def run_measure(K_):
    for line in environment(K_):
        print(line)
    ok = True
    for fn in (measure_kernel_names, measure_fp8_accumulation, measure_scale_order,
               measure_bias_rounding, measure_tinygemm_dequant):
        try:
            fn(K_)
        except Exception as e:
            ok = False
            print('ERROR %s: %s: %s' % (fn.__name__, type(e).__name__, str(e).splitlines()[0][:200]))
    return ok


# ---------------------------------------------------------------- --selftest (CPU)

SPEC_VALUES = {
    'w': r'(u4b8|u4|i4|u8b128|u8|i8|e4m3|e5m2|e2m1|f16|bf16)',
    'ws': r'(none|(f16|bf16|f32|e8m0|ue4m3)/(t|c|g\d+|b\d+x\d+))',
    'ws2': r'(none|(f16|bf16|f32|e8m0|ue4m3)/(t|c|g\d+|b\d+x\d+))',
    'wz': r'(none|(int|float)/(t|c|g\d+|b\d+x\d+))',
    'dq': r'(exact|rn|rn2|i8)', 'a': r'(f16|bf16|i8|e4m3)', 'as': r'(none|f32/(t|tok|tok-b128))',
    'az': r'(none|i32/(t|tok))', 'acc': r'(f32|fma32|i32|f8p128|f8fast)', 'red': r'(f32|none)',
    'bias': r'(none|f16|bf16|f32)', 'out': r'(f16|bf16|f32|i32)', 'ep': r'[a-z0-9:]+',
}
NP_DTYPE = {'f16': np.float16, 'bf16': np.uint16, 'f32': np.float32, 'i32': np.int32,
            'e4m3': np.uint8, 'i8': np.int8, 'u4b8': np.uint8}


def check_case_folder(d):
    """Validates one case folder against the spec grammar and the array conventions."""
    import re
    spec = open(os.path.join(d, 'spec')).read().strip()
    expect = open(os.path.join(d, 'expect')).read().strip()
    assert expect in ('PASS', 'FAIL'), expect
    kv = {}
    for part in spec.split(','):
        key, val = part.split('=', 1)
        assert key in SPEC_VALUES and re.fullmatch(SPEC_VALUES[key], val), (d, part)
        assert key not in kv, (d, key)
        kv[key] = val
    ld = lambda s: np.load(os.path.join(d, s + '.npy'))
    a, q, out = ld('a'), ld('q'), ld('out')
    m, k = a.shape
    k2, n = q.shape
    afmt = kv.get('a', 'f16')
    assert k2 == k and out.shape == (m, n), d
    assert a.dtype == NP_DTYPE[afmt] and q.dtype == NP_DTYPE[kv['w']], d
    default_out = 'i32' if kv.get('acc') == 'i32' else afmt
    assert out.dtype == NP_DTYPE[kv.get('out', default_out)], d
    if kv['w'] == 'u4b8':
        assert q.max() < 16
    files = {f[:-4] for f in os.listdir(d) if f.endswith('.npy')}
    want = {'a', 'q', 'out'}
    for key, stem in (('ws', 'scales'), ('as', 'a_scale'), ('wz', 'zeros'), ('bias', 'bias')):
        if kv.get(key, 'none') != 'none':
            want.add(stem)
    assert files == want, (d, files, want)
    if 'scales' in want:
        fmt, gran = kv['ws'].split('/')
        shp = {'t': (1, 1), 'c': (1, n)}.get(gran) or (k // int(gran[1:]), n)
        s = ld('scales')
        assert s.shape == shp and s.dtype == NP_DTYPE[fmt], (d, s.shape, shp)
    if 'a_scale' in want:
        sa = ld('a_scale')
        assert sa.dtype == np.float32 and sa.shape == {'f32/t': (1,), 'f32/tok': (m, 1)}[kv['as']], d
    if 'zeros' in want:
        z = ld('zeros')
        assert z.shape == ld('scales').shape and z.dtype == NP_DTYPE[kv['ws'].split('/')[0]], d
    if 'bias' in want:
        b = ld('bias')
        assert b.shape == (n,) and b.dtype == NP_DTYPE[kv['bias']], d
    return expect


def selftest():
    ok = True

    def check(label, cond):
        nonlocal ok
        ok &= bool(cond)
        print('%-64s %s' % (label, 'ok' if cond else 'FAILED'))

    rng = np.random.default_rng(7)
    x = rng.standard_normal(4096) * 2.0 ** rng.integers(-20, 20, 4096)
    xf = x.astype(np.float32)
    tb = torch.from_numpy(xf).to(torch.bfloat16)
    check('bf16: to_np bits decode to torch\'s value', np.array_equal(
        bf16_bits_to_f64(to_np(tb)), tb.to(torch.float64).numpy()))
    check('bf16: round_fp(., 7) equals torch RNE from f32', np.array_equal(
        round_fp(xf.astype(np.float64), 7), tb.to(torch.float64).numpy()))
    xh = xf[np.abs(xf) < 60000]
    xh = xh[(np.abs(xh) > 2.0 ** -14) | (xh == 0)]
    check('f16: round_fp(., 10) equals numpy RNE (normal range)', np.array_equal(
        round_fp(xh.astype(np.float64), 10), xh.astype(np.float16).astype(np.float64)))
    check('bf16: bf16_from_f64 / to_np round trip', np.array_equal(
        to_np(bf16_from_f64(round_fp(x[:100], 7), 'cpu')), f64_to_bf16_bits(round_fp(x[:100], 7))))
    codes = np.arange(256, dtype=np.uint8)
    tv = torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn).to(torch.float64).numpy()
    dv = e4m3_decode(codes)
    check('e4m3: numpy decoder equals torch on all 256 codes (NaN at 0x7F/0xFF)',
          np.array_equal(np.isnan(tv), np.isnan(dv)) and np.array_equal(tv[~np.isnan(tv)], dv[~np.isnan(dv)])
          and np.isnan(dv[0x7F]) and np.isnan(dv[0xFF]))
    check('e4m3: 256, 448, 5, 2^-8, 3*2^-8, 2^-9 are exact codes', np.array_equal(
        e4m3_decode(to_np(e4m3_from_f64([256, 448, 5, 2 ** -8, 3 * 2 ** -8, 2 ** -9], 'cpu'))),
        [256, 448, 5, 2 ** -8, 3 * 2 ** -8, 2 ** -9]))
    check('f32: round_int_to_f32 equals float64 RN on exact products', all(
        round_int_to_f32(*((lambda a, b: (f32_frac(a)[0] * f32_frac(b)[0], f32_frac(a)[1] + f32_frac(b)[1]))(p, r)))
        == np.float32(np.float64(p) * np.float64(r))
        for p, r in zip(xf[:200], xf[200:400]) if 2.0 ** -100 < abs(float(p) * float(r)) < 2.0 ** 100))
    for ikt in (2, 4, 8):
        n, k = 24, ikt * 16 * 2
        q = rng.integers(0, 16, (n, k), dtype=np.uint8)
        back = emulate_cuda_int4_reader(emulate_cuda_int4pack(pack_int4_nk(q), ikt), n, k, ikt)
        check('int4 pack: uint8 (N, K/2) high nibble = even k reads back, innerKTiles=%d' % ikt,
              np.array_equal(back, q))
    q = rng.integers(0, 16, (24, 64), dtype=np.uint8)
    swapped = (((q[:, 1::2] << 4) | q[:, 0::2])).astype(np.uint8)  # even k in the low nibble
    back = emulate_cuda_int4_reader(emulate_cuda_int4pack(swapped, 2), 24, 64, 2)
    check('int4 pack: the nibble-swapped layout does NOT read back (the check can fail)',
          not np.array_equal(back, q))

    # CPU tinygemm (torch._weight_int4pack_mm_for_cpu): its packing and its dequantization,
    # noted for comparison only; the dumps use the CUDA kernel.
    try:
        k, n, g = 64, 32, 32
        q_nk = rng.integers(0, 16, (n, k), dtype=np.uint8)
        s = round_fp((1 + rng.random((k // g, n))) * 2.0 ** -3, 7)
        z = round_fp(s * rng.uniform(-8, 8, s.shape) * (1 + rng.random(s.shape)), 7)
        sz = bf16_from_f64(np.stack([s, z], axis=-1), 'cpu')
        b = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(q_nk.astype(np.int32)), 2)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(bf16_from_f64(np.eye(k), 'cpu'), b, g, sz)
        out = bf16_bits_to_f64(to_np(out))
        qv, S, Z = q_nk.T - 8.0, np.repeat(s, g, 0), np.repeat(z, g, 0)
        rn, rn2 = round_fp(qv * S + Z, 7), round_fp(round_fp(qv * S, 7) + Z, 7)
        print('  CPU tinygemm takes int32 (N, K) codes (packed bytes %s); one-hot matches: '
              'rn %d/%d, rn2 %d/%d (the CUDA kernel takes uint8 (N, K/2) and rounds once in bf16)'
              % (tuple(b.shape), int((rn == out).sum()), out.size, int((rn2 == out).sum()), out.size))
        try:
            torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(pack_int4_nk(q_nk)), 2)
            print('  CPU packer accepted the uint8 (N, K/2) layout')
        except Exception as e:
            print('  CPU packer refuses the CUDA uint8 (N, K/2) layout: %s' % str(e).splitlines()[0][:100])
    except Exception as e:
        print('  CPU tinygemm not available here: %s' % str(e).splitlines()[0][:120])

    # The writer end to end, with float64 stand-ins for the kernels.
    tmp = tempfile.mkdtemp(prefix='qvet_tp_')
    try:
        w = Writer(tmp, StandinKernels())
        failed = run_families(w)
        check('dry run: every family ran with the stand-ins', not failed)
        counts = {'PASS': 0, 'FAIL': 0}
        for name in sorted(os.listdir(tmp)):
            try:
                counts[check_case_folder(os.path.join(tmp, name))] += 1
            except AssertionError as e:
                check('case folder %s' % name, False)
                print('   ', e)
        check('dry run: %d case folders (%d PASS, %d FAIL) valid, %.0f KiB' % (
            w.count, counts['PASS'], counts['FAIL'], w.bytes / 1024.0),
            w.count == counts['PASS'] + counts['FAIL'] and counts['FAIL'] > 0 and w.bytes < 2.3e6)
        # Stand-in outputs are the float64 model rounded once, so PASS cases sit within an
        # output ulp of the model and every tampered one is far from it.
        for name in sorted(os.listdir(tmp)):
            d = os.path.join(tmp, name)
            spec = open(os.path.join(d, 'spec')).read().strip()
            arrays = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith('.npy')}
            out = arrays['out']
            o = decode(out, 'bf16' if out.dtype == np.uint16 else 'f')
            y = reference(arrays, spec)
            rel = np.max(np.abs(o - y)) / max(np.max(np.abs(y)), 1e-30)
            if name.startswith('tamper_'):
                # elementwise: a tamper only has to be far off somewhere
                far = np.max(np.abs(o - y) / (np.abs(y) + 1e-3 * np.max(np.abs(y))))
                check('stand-in %s differs from its spec' % name, far > 0.05)
            elif not name.startswith('fp8w_'):
                check('stand-in %s matches its spec' % name, rel < 2.0 ** -7)
        check('measure code paths run on the stand-ins', run_measure(StandinKernels()))
    finally:
        shutil.rmtree(tmp)
    print('selftest: %s' % ('ok' if ok else 'FAILED'))
    return ok


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('outdir', nargs='?', help='folder to write the case folders into')
    p.add_argument('--measure', action='store_true', help='print the measurement tables, write nothing')
    p.add_argument('--selftest', action='store_true', help='CPU checks of the conversions and the writer')
    p.add_argument('--force', action='store_true', help='write into a non-empty OUTDIR')
    args = p.parse_args()
    if args.selftest:
        return 0 if selftest() else 1
    if not args.measure and not args.outdir:
        p.print_usage(sys.stderr)
        print('make_dumps.py: give OUTDIR, --measure or --selftest', file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print('make_dumps.py: no CUDA device is visible to torch %s (torch.cuda.is_available() is '
              'False); the dumps must come from the GPU kernels themselves. Run this on the GPU '
              'host, or use --selftest for the CPU checks.' % torch.__version__, file=sys.stderr)
        return 2
    kernels = CudaKernels()
    if args.measure:
        return 0 if run_measure(kernels) else 1
    if os.path.exists(args.outdir) and not os.path.isdir(args.outdir):
        print('make_dumps.py: %s exists and is not a folder' % args.outdir, file=sys.stderr)
        return 2
    if os.path.isdir(args.outdir) and os.listdir(args.outdir) and not args.force:
        print('make_dumps.py: %s is not empty; use --force to write into it' % args.outdir,
              file=sys.stderr)
        return 2
    try:
        os.makedirs(args.outdir, exist_ok=True)
    except OSError as e:
        print('make_dumps.py: cannot create %s: %s' % (args.outdir, e.strerror), file=sys.stderr)
        return 2
    env = environment(kernels)
    for line in env:
        print('# ' + line)
    with open(os.path.join(args.outdir, 'environment.txt'), 'w') as f:
        f.write('\n'.join(env) + '\n')
    w = Writer(args.outdir, kernels)
    failed = run_families(w)
    print('# %d cases, %.0f KiB%s' % (w.count, w.bytes / 1024.0,
                                     ('; failed families: ' + ', '.join(failed)) if failed else ''))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
