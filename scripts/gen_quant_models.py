#!/usr/bin/env python3
"""Small int8 models quantized the standard ways, for the tests (testdata/quant, issue 54).

    bench/.venv/bin/python scripts/gen_quant_models.py OUT_DIR [NAME...]

Needs the bench's virtual environment (onnx, onnxruntime and its quantizer); CI does not run it:
the models and reference outputs it writes are committed. A small float CNN and MLP are written
with onnx's helper API (random weights, fixed seeds) and quantized by ONNX Runtime's quantizer,
calibrated on random inputs:

- cnn_qdq: static, QDQ format, per-channel int8 weights, uint8 activations (conv, depthwise
  conv, a residual add, max pool, global average pool, Gemm): DequantizeLinear / QuantizeLinear
  around float ops, as most quantized models ship.
- cnn_qop: the same network, static, QOperator format, only Conv and MatMul quantized:
  QLinearConv and QLinearMatMul with QuantizeLinear / DequantizeLinear at the edges (its head is
  MatMul + Add: ORT writes a quantized Gemm as a contrib op).
- mlp_qdq: the MLP below, static, QDQ format, per-channel int8 weights, uint8 activations:
  DequantizeLinear -> MatMul -> Add -> Relu -> QuantizeLinear, as a quantized transformer's
  projections ship.
- shuffle_qdq: a ShuffleNet-style unit and an upsampling tail, static, QDQ format as cnn_qdq:
  max pool, concat, the channel shuffle's reshape / transpose / reshape, a channel slice,
  nearest resize and zero padding, each wrapped in its own QuantizeLinear / DequantizeLinear
  pair by the quantizer (pairs that aicf's import drops as identities: onnx_quant_grid.cpp).
- mlp_dynamic: dynamic quantization of a two-layer MLP with 512- and 768-long reductions:
  DynamicQuantizeLinear + MatMulInteger, the scales applied in float (the reductions are long
  enough that aicf sums them in exact chunks).

- matmulinteger_long: MatMulInteger alone, uint8 [3, 1000] by int8 [1000, 5] with zero points
  (per column for b): sums up to ~3e7, past f32's exact integers, compared exactly (i32).

Each lands in OUT_DIR/<name>/ with model.onnx, inputs/<input>.npy, and two references:
outputs/<output>.npy is ONNX Runtime with every graph optimisation (its int8 kernels: what a
user of ORT gets), reference/<output>.npy ONNX Runtime with none (each op alone, ONNX's
definition). tolerance.txt holds the absolute tolerance the test allows against both: one
quantum of the output (the last DequantizeLinear's scale: the output's, or the one cnn_qop's
float bias add reads), or for the float output of
mlp_dynamic the effect of one activation quantum on it.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)


def cnn(head="gemm"):
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def w(name, shape, scale=0.3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(x, y, cin, cout, k, stride=1, group=1):
        nodes.append(helper.make_node(
            "Conv", [x, w(y + "_w", [cout, cin // group, k, k]), w(y + "_b", [cout], 0.1)], [y],
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group))
        return y

    def relu(x, y):
        nodes.append(helper.make_node("Relu", [x], [y]))
        return y

    h = relu(conv("input", "c1", 3, 16, 3), "r1")
    h = relu(conv(h, "dw", 16, 16, 3, group=16), "r2")
    h2 = relu(conv(h, "pw", 16, 16, 1), "r3")
    nodes.append(helper.make_node("Add", [h2, "r1"], ["res"]))
    nodes.append(helper.make_node("MaxPool", ["res"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]))
    h = relu(conv("mp", "c2", 16, 32, 3, stride=2), "r4")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    if head == "gemm":
        nodes.append(helper.make_node("Gemm", ["flat", w("fc_w", [10, 32]), w("fc_b", [10], 0.1)],
                                      ["logits"], transB=1))
    else:  # MatMul + Add, which the QOperator format quantizes with standard ops
        nodes.append(helper.make_node("MatMul", ["flat", w("fc_w", [32, 10])], ["fc"]))
        nodes.append(helper.make_node("Add", ["fc", w("fc_b", [10], 0.1)], ["logits"]))
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def shuffle():
    """A ShuffleNet-style unit and an upsampling tail: ops that only move values (max pool, a
    concat, the channel shuffle's reshape / transpose / reshape, a channel slice, nearest resize,
    zero padding), each of which ORT's QDQ quantizer wraps in its own QuantizeLinear /
    DequantizeLinear pair."""
    rng = np.random.default_rng(19)
    inits, nodes = [], []

    def w(name, shape, scale=0.3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, values):
        inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def conv(x, y, cin, cout, k, relu=True):
        nodes.append(helper.make_node(
            "Conv", [x, w(y + "_w", [cout, cin, k, k]), w(y + "_b", [cout], 0.1)],
            [y + "_c" if relu else y], kernel_shape=[k, k], pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [y + "_c"], [y]))
        return y

    conv("input", "c1", 3, 16, 3)
    nodes.append(helper.make_node("MaxPool", ["c1"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]))
    conv("mp", "b1", 16, 16, 1)
    conv("mp", "b2", 16, 16, 3)
    nodes.append(helper.make_node("Concat", ["b1", "b2"], ["cat"], axis=1))
    nodes.append(helper.make_node("Reshape", ["cat", const("s5", [1, 2, 16, 16, 16])], ["r5"]))
    nodes.append(helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]))
    nodes.append(helper.make_node("Reshape", ["t5", const("s4", [1, 32, 16, 16])], ["shuf"]))
    nodes.append(helper.make_node("Slice", ["shuf", const("st", [0]), const("en", [16]),
                                            const("ax", [1])], ["half"]))
    conv("half", "c3", 16, 8, 3)
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up"))
    nodes.append(helper.make_node("Resize", ["c3", "", "up"], ["big"], mode="nearest"))
    nodes.append(helper.make_node("Pad", ["big", const("pads", [0, 0, 1, 1, 0, 0, 1, 1])],
                                  ["padded"]))
    conv("padded", "output", 8, 4, 3, relu=False)
    graph = helper.make_graph(
        nodes, "shuffle", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                         [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 34, 34])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def mlp():
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.05).astype(np.float32), n)
             for n, s in [("w1", [512, 768]), ("b1", [768]), ("w2", [768, 64]), ("b2", [64])]]
    nodes = [helper.make_node("MatMul", ["input", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["output"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [4, 64])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


class Reader(CalibrationDataReader):
    def __init__(self, name, shape, n=8):
        rng = np.random.default_rng(3)
        self.data = iter([{name: rng.standard_normal(shape).astype(np.float32)}
                          for _ in range(n)])

    def get_next(self):
        return next(self.data, None)


def run(path, feeds, optimize):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else
                                   ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def last_dq_scale(model):
    """The scale of the last DequantizeLinear (the output's, or the one the float head reads)."""
    m = onnx.load(model)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    return float(np.max(inits[dqs[-1].input[1]]))


def write(out_dir, name, float_model, quantize, input_shape, tolerance=None):
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "outputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "reference"), exist_ok=True)
    src = os.path.join(d, "float.onnx")
    onnx.save(float_model, src)
    path = os.path.join(d, "model.onnx")
    quantize(src, path)
    os.remove(src)
    feeds = {"input": np.random.default_rng(5).standard_normal(input_shape).astype(np.float32)}
    np.save(os.path.join(d, "inputs", "input.npy"), feeds["input"])
    for sub, opt in [("outputs", True), ("reference", False)]:
        for k, v in run(path, feeds, opt).items():
            np.save(os.path.join(d, sub, k + ".npy"), v)
    tol = tolerance if tolerance is not None else last_dq_scale(path)
    with open(os.path.join(d, "tolerance.txt"), "w") as f:
        f.write(f"{tol:.9g}\n")
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: {', '.join(ops)}; tolerance {tol:.3g}")


def matmul_integer():
    rng = np.random.default_rng(13)
    b = rng.integers(-128, 128, [1000, 5]).astype(np.int8)
    b[:, 0] = -128  # the worst case: a column of -128 against a - zp up to 252
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.uint8(3), "a_zp"),
             numpy_helper.from_array(np.array([0, 1, -2, 3, 0], np.int8), "b_zp")]
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["input", "b", "a_zp", "b_zp"], ["output"])], "mmi",
        [helper.make_tensor_value_info("input", TensorProto.UINT8, [3, 1000])],
        [helper.make_tensor_value_info("output", TensorProto.INT32, [3, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def write_exact(out_dir, name, model, feed):
    d = os.path.join(out_dir, name)
    for sub in ["inputs", "outputs", "reference"]:
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    np.save(os.path.join(d, "inputs", "input.npy"), feed)
    got = run(path, {"input": feed}, True)["output"]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    want = (feed.astype(np.int64) - int(inits["a_zp"])) @ (
        inits["b"].astype(np.int64) - inits["b_zp"].astype(np.int64))
    assert (got == want).all(), "ONNX Runtime disagrees with the exact product"
    np.save(os.path.join(d, "outputs", "output.npy"), got)
    np.save(os.path.join(d, "reference", "output.npy"), want.astype(np.int32))
    with open(os.path.join(d, "tolerance.txt"), "w") as f:
        f.write("0\n")
    print(f"{name}: MatMulInteger; |output| up to {np.abs(want).max()}; tolerance 0")


def main():
    out_dir = sys.argv[1]
    only = set(sys.argv[2:])  # model names: write only those (default: all)

    def wanted(name):
        return not only or name in only

    feed = np.random.default_rng(17).integers(0, 256, [3, 1000]).astype(np.uint8)
    feed[0] = 255
    if wanted("matmulinteger_long"):
        write_exact(out_dir, "matmulinteger_long", matmul_integer(), feed)
    shape = [1, 3, 32, 32]
    if wanted("cnn_qdq"):
        write(out_dir, "cnn_qdq", cnn(), lambda s, d: quantize_static(
            s, d, Reader("input", shape), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8), shape)
    if wanted("cnn_qop"):
        write(out_dir, "cnn_qop", cnn("matmul"), lambda s, d: quantize_static(
            s, d, Reader("input", shape), quant_format=QuantFormat.QOperator, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            op_types_to_quantize=["Conv", "MatMul"]), shape)
    if wanted("shuffle_qdq"):
        write(out_dir, "shuffle_qdq", shuffle(), lambda s, d: quantize_static(
            s, d, Reader("input", shape), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8), shape)
    if wanted("mlp_qdq"):
        write(out_dir, "mlp_qdq", mlp(), lambda s, d: quantize_static(
            s, d, Reader("input", [4, 512]), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8), [4, 512])
    if not wanted("mlp_dynamic"):
        return
    # One activation quantum of the hidden layer (its range over 255) through the second layer
    # moves an output by at most that times the largest |w2| column sum; measured figures are far
    # below: the stated tolerance is 2 quanta of the output's own range / 255.
    m = mlp()
    feeds = {"input": np.random.default_rng(5).standard_normal([4, 512]).astype(np.float32)}
    tmp = os.path.join(out_dir, "mlp_float.onnx")
    onnx.save(m, tmp)
    ref = run(tmp, feeds, False)["output"]
    os.remove(tmp)
    write(out_dir, "mlp_dynamic", m, lambda s, d: quantize_dynamic(
        s, d, weight_type=QuantType.QInt8), [4, 512],
        tolerance=2 * float(ref.max() - ref.min()) / 255)


if __name__ == "__main__":
    main()
