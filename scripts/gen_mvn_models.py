#!/usr/bin/env python3
"""Writes the MeanVarianceNormalization test models, with references from ONNX's own definition.

MVN is the norm nobody wrote a recipe for (issue 16): over trailing axes the importer makes it
one mean_variance_norm op whose online_reducible_norm certificate (a Welford row) lowers it, over
other axes ONNX's function body in primitive ops. These models check the importer and the
interpreter against ONNX, and (once the lowering reads the certificate) the compiled code.

Run by hand with Debian's onnx and numpy (CI uses the committed files):
    apt-get install python3-onnx python3-numpy
    /usr/bin/python3 scripts/gen_mvn_models.py        # writes testdata/norm_variants/

Each model goes to testdata/norm_variants/<name>/: model.onnx, inputs/X.npy, outputs/Y.npy (the
layout of testdata/models). The reference is ONNX's schema function body for the model's opset,
taken from the installed onnx and evaluated node by node with numpy in float32, which is what
onnx.reference does for a function op (this onnx, 1.12, predates onnx.reference). It is checked
against the formula of ONNX's backend test (test_mvn) as well.
"""
import os
import shutil

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "norm_variants")

# name: (opset, input shape, axes or None for ONNX's default [0, 2, 3], what it covers)
MODELS = {
    "mvn_trailing_op13": (13, [2, 3, 4, 5], [2, 3], "trailing axes: one mean_variance_norm op"),
    "mvn_negative_axes_op13": (13, [8, 4, 96], [-2, -1], "negative trailing axes, 384-long rows"),
    "mvn_last_axis_op9": (9, [4, 64], [1], "opset 9, the last axis"),
    "mvn_default_axes_op13": (13, [2, 3, 4, 5], None, "default [0, 2, 3]: the function body"),
    "mvn_middle_axes_op13": (13, [2, 3, 4, 5], [1, 2], "contiguous but not trailing"),
}


def function_body_reference(opset, x, axes):
    """Evaluates ONNX's function body of MeanVarianceNormalization-<opset> on x."""
    schema = onnx.defs.get_schema("MeanVarianceNormalization", opset)
    body = schema.function_body
    axes = list(axes) if axes is not None else [0, 2, 3]
    env = {"X": x}
    for node in body.node:
        ins = [env[i] for i in node.input]
        attrs = {}
        for a in node.attribute:
            attrs[a.name] = axes if a.ref_attr_name == "axes" else helper.get_attribute_value(a)
        op = node.op_type
        if op == "Constant":
            out = numpy_helper.to_array(attrs["value"])
        elif op == "ReduceMean":
            out = np.mean(ins[0], axis=tuple(attrs["axes"]), keepdims=True)
        elif op == "Pow":
            out = np.power(ins[0], ins[1])
        elif op == "Sub":
            out = ins[0] - ins[1]
        elif op == "Sqrt":
            out = np.sqrt(ins[0])
        elif op == "Add":
            out = ins[0] + ins[1]
        elif op == "Div":
            out = ins[0] / ins[1]
        else:
            raise SystemExit(f"MeanVarianceNormalization-{opset} body uses {op}: extend the evaluator")
        env[node.output[0]] = out.astype(np.float32)
    return env["Y"]


def backend_test_formula(x, axes):
    # onnx/backend/test/case/node/meanvariancenormalization.py (test_mvn), for any axes.
    axes = tuple(axes) if axes is not None else (0, 2, 3)
    mean = np.mean(x, axis=axes, keepdims=True)
    std = np.sqrt(np.mean(np.power(x, 2), axis=axes, keepdims=True) - np.power(mean, 2))
    return (x - mean) / (std + 1e-9)


def main():
    rng = np.random.default_rng(16)
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    for name, (opset, shape, axes, _) in MODELS.items():
        # Offset and scaled, so the mean matters; well away from a constant row, where ONNX's
        # E[x^2] - E[x]^2 may cancel to a negative variance (NaN) and the definitions part.
        x = (rng.standard_normal(shape) * 3.0 + 2.0).astype(np.float32)
        attrs = {} if axes is None else {"axes": axes}
        node = helper.make_node("MeanVarianceNormalization", ["X"], ["Y"], **attrs)
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, shape)])
        model = helper.make_model(graph, producer_name="aicf gen_mvn_models.py",
                                  opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 7
        onnx.checker.check_model(model)
        ref_axes = None if axes is None else [a % len(shape) for a in axes]
        y = function_body_reference(opset, x, ref_axes)
        np.testing.assert_allclose(y, backend_test_formula(x, ref_axes), rtol=1e-5, atol=1e-6)
        out = os.path.join(ROOT, name)
        os.makedirs(os.path.join(out, "inputs"))
        os.makedirs(os.path.join(out, "outputs"))
        onnx.save(model, os.path.join(out, "model.onnx"))
        np.save(os.path.join(out, "inputs", "X.npy"), x)
        np.save(os.path.join(out, "outputs", "Y.npy"), y)
        print("wrote", os.path.relpath(out))


if __name__ == "__main__":
    main()
