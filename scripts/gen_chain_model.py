#!/usr/bin/env python3
"""Writes an N-node chain model for compile-time scaling measurements (scripts/bench_compile.sh).

    /usr/bin/python3 scripts/gen_chain_model.py N OUT.onnx [--kind relu|block] [--width W]

--kind relu (default): x -> Relu -> Relu -> ... (N Relus) on a [1, W] tensor, the model of
issue 15's timings. Pointwise fusion groups a chain of Relus into one kernel, so this measures
the graph passes, fusion and planning on a long graph rather than the number of kernels.

--kind block: N nodes as N/3 repeated blocks MatMul(W_i) -> Add(b_i) -> Relu on [1, W] with
distinct (seeded) weights, like the layers of a transformer: a kernel per block at least, all of
the same shape, so codegen emits a kernel function once and many steps call it.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def relu_chain(n, width):
    nodes = []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu{i}"))
        prev = out
    return nodes, []


def block_chain(n, width):
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    blocks = max(1, n // 3)
    prev = "x"
    for i in range(blocks):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = (rng.standard_normal((width,)) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == blocks - 1 else f"r{i}"
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"a{i}"], [out], name=f"relu{i}"),
        ]
        prev = out
    return nodes, inits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, help="number of nodes")
    ap.add_argument("out", help="output .onnx path")
    ap.add_argument("--kind", choices=["relu", "block"], default="relu")
    ap.add_argument("--width", type=int, default=64)
    a = ap.parse_args()
    nodes, inits = (relu_chain if a.kind == "relu" else block_chain)(a.n, a.width)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, a.width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, a.width])
    graph = helper.make_graph(nodes, f"{a.kind}_chain_{a.n}", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="gen_chain_model")
    model.ir_version = 8
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
