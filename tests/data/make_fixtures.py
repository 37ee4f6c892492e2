#!/usr/bin/env python3
"""Writes the .npy and .safetensors fixtures of tests/t_npy.c and
tests/t_safetensors.c with numpy and the reference safetensors package.
The files are committed, so CI needs neither; rerun this only to change them:
    python3 tests/data/make_fixtures.py

Element i (flat, C order) of every fixture holds a value the C tests derive
on their own from i:
    s(i) = (i*37 + 11) % 255 - 127      (in -127..127)
    u(i) = (i*37 + 11) % 256            (in 0..255)
    int8/16/32/64   s(i) * (1, 0x0101, 0x01010101, 0x0101010101010101)
    uint8/16/32/64  u(i) * (1, 0x0101, 0x01010101, 0x0101010101010101)
    float16/32/64   s(i) / 8            (exact in every float format)
"""
import os
import numpy as np
import numpy.lib.format as fmt

HERE = os.path.dirname(os.path.abspath(__file__))
REP = {1: 1, 2: 0x0101, 4: 0x01010101, 8: 0x0101010101010101}


def values(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    s = (i * 37 + 11) % 255 - 127
    u = (i * 37 + 11) % 256
    dt = np.dtype(dtype)
    if dt.kind == 'f':
        v = (s.astype(np.float64) / 8).astype(dt)
    elif dt.kind == 'i':
        v = (s.astype(object) * REP[dt.itemsize])
        v = np.array(list(v), dtype=dt) if n else np.zeros(0, dt)
    else:
        v = (u.astype(object) * REP[dt.itemsize])
        v = np.array(list(v), dtype=dt) if n else np.zeros(0, dt)
    return v.reshape(shape)


# (file stem, dtype, shape): every dtype qvet reads, ndim 0..4, an empty array.
NPY = [
    ("i1_7", "i1", (7,)),
    ("u1_2x3", "u1", (2, 3)),
    ("u1_1000", "u1", (1000,)),
    ("i2_scalar", "<i2", ()),
    ("u2_2x3x4", "<u2", (2, 3, 4)),
    ("i4_1x2x3x4", "<i4", (1, 2, 3, 4)),
    ("u4_5", "<u4", (5,)),
    ("i8_3x2", "<i8", (3, 2)),
    ("u8_4", "<u8", (4,)),
    ("f2_2x2x2", "<f2", (2, 2, 2)),
    ("f4_3x4", "<f4", (3, 4)),
    ("f8_2x3x1x2", "<f8", (2, 3, 1, 2)),
    ("f4_0x3", "<f4", (0, 3)),
]


def main():
    d = os.path.join(HERE, "npy")
    os.makedirs(d, exist_ok=True)
    for stem, dt, shape in NPY:
        np.save(os.path.join(d, stem + ".npy"), values(dt, shape))
    a = values("<f4", (3, 4))
    for ver in ((2, 0), (3, 0)):
        with open(os.path.join(d, "f4_3x4_v%d.npy" % ver[0]), "wb") as f:
            fmt.write_array(f, a, version=ver)
    # Bool reads as u1.
    np.save(os.path.join(d, "b1_5.npy"), np.array([True, False, True, True, False]))
    # Refused: Fortran order, big-endian, complex, structured.
    np.save(os.path.join(d, "bad_fortran_2x3.npy"), np.asfortranarray(values("<f4", (2, 3))))
    np.save(os.path.join(d, "bad_bigendian_f4.npy"), values("<f4", (4,)).astype(">f4"))
    np.save(os.path.join(d, "bad_complex_c8.npy"), np.zeros(3, np.complex64))
    np.save(os.path.join(d, "bad_structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))

    from safetensors.numpy import save_file
    s = os.path.join(HERE, "st")
    os.makedirs(s, exist_ok=True)
    tensors = {
        "w.f64": values("<f8", (2, 3)),
        "w.f32": values("<f4", (4,)),
        "w.f16": values("<f2", (2, 2, 2)),
        "w.i64": values("<i8", (3,)),
        "w.i32": values("<i4", (1, 2, 3, 1)),
        "w.i16": values("<i2", ()),
        "w.i8": values("i1", (5,)),
        "w.u8": values("u1", (3, 3)),
        "w.u16": values("<u2", (2,)),
        "w.u32": values("<u4", (2,)),
        "empty": values("<f4", (0, 4)),
    }
    save_file(tensors, os.path.join(s, "mixed.safetensors"))
    save_file({"a": values("<f4", (2, 2)), "b": values("i1", (3,))},
              os.path.join(s, "meta.safetensors"), metadata={"format": "pt", "note": "qvet fixture"})


if __name__ == "__main__":
    main()
