#!/usr/bin/env python3
"""Writes the libFuzzer seeds fuzz/corpus/lf_gguf/ with the `gguf` package's
writer (independent of eval/gguf_write.c): a tiny llama model with a
byte-level BPE vocabulary, tensors of every type qvet decodes, metadata of
every value type, and a few malformed files.

    pip install gguf numpy
    python3 eval/gen_gguf_seeds.py fuzz/corpus/lf_gguf
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter


def q8_0(x):
    """ggml Q8_0 blocks: f16 d = amax/127, then 32 int8 = round(x/d)."""
    out = bytearray()
    for b in x.reshape(-1, 32):
        d = np.float16(np.abs(b).max() / 127.0)
        q = np.clip(np.round(b / np.float32(d) if d else b * 0), -127, 127).astype(np.int8)
        out += d.tobytes() + q.tobytes()
    return np.frombuffer(bytes(out), dtype=np.uint8)


def q4(x, with_min):
    """Q4_0 (x = (q-8)d) or Q4_1 (x = q d + m): byte j = value j | value j+16 << 4."""
    out = bytearray()
    for b in x.reshape(-1, 32):
        if with_min:
            m = np.float16(b.min())
            d = np.float16((b.max() - b.min()) / 15.0)
            q = np.clip(np.round((b - np.float32(m)) / np.float32(d) if d else b * 0), 0, 15).astype(np.uint8)
            head = d.tobytes() + m.tobytes()
        else:
            d = np.float16(np.abs(b).max() / 7.0)
            q = np.clip(np.round(b / np.float32(d) if d else b * 0) + 8, 0, 15).astype(np.uint8)
            head = d.tobytes()
        out += head + bytes(q[:16] | (q[16:] << 4))
    return np.frombuffer(bytes(out), dtype=np.uint8)


def tiny_model(path, rng):
    w = GGUFWriter(path, "llama")
    dim, hid, heads, kv, vocab = 32, 64, 4, 2, 260
    w.add_uint32("llama.embedding_length", dim)
    w.add_uint32("llama.feed_forward_length", hid)
    w.add_uint32("llama.block_count", 1)
    w.add_uint32("llama.attention.head_count", heads)
    w.add_uint32("llama.attention.head_count_kv", kv)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "smollm")
    alphabet = [chr(b) if (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255) else None for b in range(256)]
    n = 0
    for b in range(256):
        if alphabet[b] is None:
            alphabet[b] = chr(256 + n)
            n += 1
    toks = alphabet + ["Ġt", "he", "Ġthe", "in"]
    w.add_token_list(toks)
    w.add_token_merges(["Ġ t", "h e", "Ġt he", "i n"])
    w.add_uint32("tokenizer.ggml.bos_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    f = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    w.add_tensor("token_embd.weight", q8_0(f(vocab, dim)).reshape(vocab, -1), raw_dtype=Q.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(dim, np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(dim, np.float16))
    w.add_tensor("blk.0.attn_q.weight", q4(f(dim, dim), False).reshape(dim, -1), raw_dtype=Q.Q4_0)
    w.add_tensor("blk.0.attn_k.weight", q4(f(kv * 8, dim), True).reshape(kv * 8, -1), raw_dtype=Q.Q4_1)
    w.add_tensor("blk.0.attn_v.weight", f(kv * 8, dim).astype(np.float16))
    w.add_tensor("blk.0.attn_output.weight", f(dim, dim))
    w.add_tensor("blk.0.ffn_gate.weight", f(hid, dim))
    w.add_tensor("blk.0.ffn_up.weight", f(hid, dim))
    bf16 = (f(dim, hid).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("blk.0.ffn_down.weight", bf16.view(np.uint8).reshape(dim, hid * 2), raw_dtype=Q.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_metadata(path):
    w = GGUFWriter(path, "none")
    w.add_uint8("a.u8", 200)
    w.add_int8("a.i8", -100)
    w.add_uint16("a.u16", 60000)
    w.add_int16("a.i16", -30000)
    w.add_uint32("a.u32", 4000000000)
    w.add_int32("a.i32", -2000000000)
    w.add_float32("a.f32", 0.15625)
    w.add_uint64("a.u64", 2**63)
    w.add_int64("a.i64", -(2**40))
    w.add_float64("a.f64", -1 / 3)
    w.add_bool("a.bool", True)
    w.add_string("a.str", "h\u00e9llo")
    w.add_array("a.arr_i32", [1, -2, 3])
    w.add_array("a.arr_str", ["x", "", "yz"])
    w.add_array("a.arr_f32", [0.5, 1.5])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1129)
    tiny_model(os.path.join(out, "tiny_llama.gguf"), rng)
    all_metadata(os.path.join(out, "all_metadata.gguf"))
    good = open(os.path.join(out, "tiny_llama.gguf"), "rb").read()
    bad = {
        "bad_magic.gguf": b"GGUX" + good[4:],
        "bad_version.gguf": good[:4] + struct.pack("<I", 1) + good[8:],
        "truncated_header.gguf": good[:20],
        "truncated_metadata.gguf": good[:300],
        "truncated_data.gguf": good[:-100],
        "absurd_counts.gguf": good[:8] + struct.pack("<QQ", 2**62, 2**62) + good[24:],
    }
    for name, data in bad.items():
        open(os.path.join(out, name), "wb").write(data)


if __name__ == "__main__":
    main()
