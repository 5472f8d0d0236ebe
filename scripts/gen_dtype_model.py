#!/usr/bin/env python3
"""Writes testdata/models/dtypes_op17: a small model whose tensors are the integer family and
float64, as deployment front ends carry them (issue 20), with seeded inputs and references.

Run by hand with the bench virtual environment (onnx's reference evaluator computes the
references; ONNX Runtime, where it has kernels for these types, is checked against them):
    bench/.venv/bin/python scripts/gen_dtype_model.py

The graph:
- a uint8 image normalised in float32 and convolved (Cast, Sub, Div, Conv, Relu), and its 2x2
  max pool kept in uint8;
- the same image doubled in uint8 (wraps at 256) and scaled by 300 in uint16 (wraps at 65536);
- int16 PCM audio scaled in float64 by a float64 gain and reduced to an energy per row
  (ReduceSum in float64), and its absolute peak per row (Abs in int16: -32768 stays -32768,
  then int32 ReduceMax);
- uint64 ids hashed by a multiply that wraps at 2^64 and a modulus, and compared with 2^63
  (unsigned order).
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "models")
NAME = "dtypes_op17"


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def main():
    rng = np.random.default_rng(17)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(4).astype(np.float32) * 0.1
    inits = [
        const("w", w), const("b", b),
        const("half", np.float32(127.5)),
        const("full_scale", np.float64(32768.0)),
        const("u16_300", np.uint16(300)),
        const("mult", np.uint64(0x9E3779B97F4A7C15)),
        const("modulus", np.uint64(1000003)),
        const("two63", np.uint64(1 << 63)),
        const("axis1", np.array([1], dtype=np.int64)),
    ]
    nodes = [
        helper.make_node("Cast", ["image"], ["img_f"], to=T.FLOAT),
        helper.make_node("Sub", ["img_f", "half"], ["img_c"]),
        helper.make_node("Div", ["img_c", "half"], ["img_n"]),
        helper.make_node("Conv", ["img_n", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["features"]),
        helper.make_node("MaxPool", ["image"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["image", "image"], ["doubled"]),
        helper.make_node("Cast", ["image"], ["img_u16"], to=T.UINT16),
        helper.make_node("Mul", ["img_u16", "u16_300"], ["scaled"]),
        helper.make_node("Cast", ["audio"], ["audio_f64"], to=T.DOUBLE),
        helper.make_node("Mul", ["audio_f64", "gain"], ["audio_g"]),
        helper.make_node("Div", ["audio_g", "full_scale"], ["audio_n"]),
        helper.make_node("Mul", ["audio_n", "audio_n"], ["audio_sq"]),
        helper.make_node("ReduceSum", ["audio_sq", "axis1"], ["energy"], keepdims=0),
        helper.make_node("Abs", ["audio"], ["audio_abs"]),
        helper.make_node("Cast", ["audio_abs"], ["audio_abs32"], to=T.INT32),
        helper.make_node("ReduceMax", ["audio_abs32"], ["peak"], axes=[1], keepdims=0),
        helper.make_node("Mul", ["ids", "mult"], ["ids_m"]),
        helper.make_node("Mod", ["ids_m", "modulus"], ["hash"]),
        helper.make_node("GreaterOrEqual", ["ids", "two63"], ["high"]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "dtypes",
        [vi("image", T.UINT8, [1, 3, 8, 8]), vi("audio", T.INT16, [2, 64]),
         vi("gain", T.DOUBLE, [1]), vi("ids", T.UINT64, [6])],
        [vi("features", T.FLOAT, [1, 4, 8, 8]), vi("pooled", T.UINT8, [1, 3, 4, 4]),
         vi("doubled", T.UINT8, [1, 3, 8, 8]), vi("scaled", T.UINT16, [1, 3, 8, 8]),
         vi("energy", T.DOUBLE, [2]), vi("peak", T.INT32, [2]), vi("hash", T.UINT64, [6]),
         vi("high", T.BOOL, [6])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aicf gen_dtype_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)

    audio = rng.integers(-32768, 32768, size=(2, 64), dtype=np.int16)
    audio[0, 5] = -32768  # Abs wraps: the peak of row 0 is 32767 or less
    inputs = {
        "image": rng.integers(0, 256, size=(1, 3, 8, 8), dtype=np.uint8),
        "audio": audio,
        "gain": np.array([0.7071067811865476], dtype=np.float64),
        "ids": np.array([0, 1, 12345, (1 << 63) - 1, 1 << 63, (1 << 64) - 1], dtype=np.uint64),
    }
    names = [o.name for o in graph.output]
    outputs = ReferenceEvaluator(model).run(None, inputs)
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for n, got, want in zip(names, sess.run(None, inputs), outputs):
            ok = np.array_equal(got, want) if want.dtype != np.float32 else np.allclose(got, want, 1e-5, 1e-6)
            print(f"  ONNX Runtime {n}: {'agrees' if ok else 'DIFFERS'}")
    except Exception as e:  # ORT lacks kernels for some of these types
        print(f"  ONNX Runtime cannot run it: {str(e).splitlines()[0][:160]}")

    out_dir = os.path.join(ROOT, NAME)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(os.path.join(out_dir, "inputs"))
    os.makedirs(os.path.join(out_dir, "outputs"))
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    for n, a in inputs.items():
        np.save(os.path.join(out_dir, "inputs", n + ".npy"), a)
    for n, a in zip(names, outputs):
        np.save(os.path.join(out_dir, "outputs", n + ".npy"), a)
    with open(os.path.join(out_dir, "args.txt"), "w") as f:
        f.write("\n")
    print(f"{NAME}: {len(nodes)} nodes, outputs {names}")


if __name__ == "__main__":
    main()
