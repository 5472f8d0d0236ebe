#!/usr/bin/python3
"""Generates testdata/layout/: small models for the producer side of layout folding (issue 17;
golden testdata/ir/cli/layout_stores.mcir). Each folder holds model.onnx, inputs/*.npy and the
numpy reference outputs/*.npy that aicf-run --reference checks.

  stores: a concat filled by four producers (an exp, a matmul with its bias, and two values of
          one elementwise kernel) read by a layer norm; a concat that is a graph output; a
          transpose of a matmul's result that is a graph output (a strided store).

Run by hand with Debian's python3-onnx and commit the output:
    /usr/bin/python3 scripts/gen_layout_models.py
"""
import os

import numpy as np
from onnx import helper

from onnx_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "layout")


def save(name, nodes, inputs, weights, outputs):
    save_case(OUT, name, "gen_layout_models", nodes, inputs, outputs, inputs, outputs, weights)


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def main():
    rng = np.random.default_rng(17)
    f = np.float32
    a = rng.standard_normal((8, 6)).astype(f)
    b = rng.standard_normal((8, 16)).astype(f)
    c = rng.standard_normal((8, 5)).astype(f)
    w = (rng.standard_normal((16, 10)) * 0.25).astype(f)
    bias = rng.standard_normal((10,)).astype(f)
    g = rng.standard_normal((26,)).astype(f)
    be = rng.standard_normal((26,)).astype(f)
    w2 = (rng.standard_normal((16, 12)) * 0.25).astype(f)
    nodes = [
        helper.make_node("Exp", ["a"], ["ea"]),
        helper.make_node("MatMul", ["b", "w"], ["mb"]),
        helper.make_node("Add", ["mb", "bias"], ["mbb"]),
        helper.make_node("Tanh", ["c"], ["tc"]),
        helper.make_node("Neg", ["tc"], ["nc"]),
        helper.make_node("Sigmoid", ["tc"], ["sc"]),
        helper.make_node("Concat", ["ea", "mbb", "nc", "sc"], ["cat"], axis=1),
        helper.make_node("LayerNormalization", ["cat", "g", "be"], ["y"], axis=-1, epsilon=1e-5),
        # A concat that is a graph output: its producers write the caller's buffer.
        helper.make_node("Relu", ["a"], ["ra"]),
        helper.make_node("Sin", ["c"], ["sn"]),
        helper.make_node("Concat", ["ra", "sn"], ["z"], axis=1),
        # A transpose of a matmul's result that is a graph output: a strided store.
        helper.make_node("MatMul", ["b", "w2"], ["m2"]),
        helper.make_node("Relu", ["m2"], ["r2"]),
        helper.make_node("Transpose", ["r2"], ["t"], perm=[1, 0]),
    ]
    ea = np.exp(a)
    mbb = b @ w + bias
    tc = np.tanh(c)
    cat = np.concatenate([ea, mbb, -tc, 1 / (1 + np.exp(-tc))], axis=1)
    y = layer_norm(cat, g, be).astype(f)
    z = np.concatenate([np.maximum(a, 0), np.sin(c)], axis=1).astype(f)
    t = np.ascontiguousarray(np.maximum(b @ w2, 0).T).astype(f)
    save("stores", nodes, [("a", a), ("b", b), ("c", c)],
         [("w", w), ("bias", bias), ("g", g), ("be", be), ("w2", w2)],
         [("y", y), ("z", z), ("t", t)])


if __name__ == "__main__":
    main()
