"""Writes one small ONNX test model folder (shared by the scripts/gen_*_models.py generators):
model.onnx (opset 17, float tensors, weights as initializers), inputs/*.npy for aicf-run
--input and the reference outputs/*.npy for aicf-run --reference."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save_case(out_dir, name, producer, nodes, inputs, outputs, feeds, refs, weights=()):
    """inputs / outputs: (name, array) pairs giving the graph's value infos (their shapes);
    feeds / refs: the (name, array) pairs saved as inputs/ and outputs/; weights: initializers."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in outputs],
        initializer=[numpy_helper.from_array(v, n) for n, v in weights])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name=producer)
    m.ir_version = 8
    onnx.checker.check_model(m)
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "outputs"), exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for n, v in feeds:
        np.save(os.path.join(d, "inputs", n + ".npy"), v)
    for n, v in refs:
        np.save(os.path.join(d, "outputs", n + ".npy"), v)
