"""Writes mlp_f16.onnx: a model already in half precision (fp16 inputs, weights, activations and
outputs, as torch's model.half() exports them): LayerNorm -> Gemm(relu) -> MatMul + bias ->
Softmax, opset 17. tests/unit/test_precision.cpp imports and compiles it. Run with the onnx and
numpy packages (bench/.venv): python3 make_mlp_f16.py"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(22)
h = np.float16
inits = [
    numpy_helper.from_array((1 + 0.1 * rng.standard_normal(64)).astype(h), "ln.weight"),
    numpy_helper.from_array((0.1 * rng.standard_normal(64)).astype(h), "ln.bias"),
    numpy_helper.from_array((rng.standard_normal((96, 64)) / 8).astype(h), "fc1.weight"),
    numpy_helper.from_array((0.1 * rng.standard_normal(96)).astype(h), "fc1.bias"),
    numpy_helper.from_array((rng.standard_normal((96, 40)) / 10).astype(h), "fc2.weight"),
    numpy_helper.from_array((0.1 * rng.standard_normal(40)).astype(h), "fc2.bias"),
]
nodes = [
    helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["n"], axis=-1,
                     epsilon=1e-5),
    helper.make_node("Gemm", ["n", "fc1.weight", "fc1.bias"], ["g"], transB=1),
    helper.make_node("Relu", ["g"], ["r"]),
    helper.make_node("MatMul", ["r", "fc2.weight"], ["m"]),
    helper.make_node("Add", ["m", "fc2.bias"], ["a"]),
    helper.make_node("Softmax", ["a"], ["y"], axis=-1),
]
graph = helper.make_graph(nodes, "mlp_f16",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [48, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [48, 40])],
                          inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="aicf-testdata")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "mlp_f16.onnx")
np.save("x.npy", rng.standard_normal((48, 64)).astype(h))
