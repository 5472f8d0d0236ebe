#!/usr/bin/env python3
"""Writes testdata/loops/loop_runtime_op17: a model whose Loop is kept at run time (issue 20),
with seeded inputs and references from ONNX Runtime. (onnx 1.23's reference evaluator gets the
nested loop's count wrong: it returns 0 where ONNX Runtime and aicf's interpreter give
1 + 2 + ... + trips; it is checked on the outputs without the nested loop.)

Run by hand with the bench virtual environment:
    bench/.venv/bin/python scripts/gen_loop_model.py

The graph: a recurrence h <- tanh(h @ W + x) with an accumulator acc <- acc + h, run for the
trip count `steps` (a runtime input) while max|h - h_prev| > tol (a runtime input): a
fixed-point iteration that stops on its own. W is an initializer of the outer graph read by the
body, x an outer activation (x = relu(inp @ U)); after the loop, softmax(h) and the accumulator
are the outputs, and a second, nested use: an inner Loop counting up to `steps` in the body
(a loop inside a loop) scales acc by the iteration count.
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "loops")
NAME = "loop_runtime_op17"


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def main():
    rng = np.random.default_rng(20)
    n, d = 4, 16
    w = (rng.standard_normal((d, d)) * 0.25).astype(np.float32)
    u = (rng.standard_normal((d, d)) * 0.3).astype(np.float32)
    vi = helper.make_tensor_value_info

    # inner loop: counts its iterations into a float (k <- k + 1), trip count = outer iteration+1
    inner = helper.make_graph(
        [helper.make_node("Identity", ["ic"], ["ic_out"]),
         helper.make_node("Add", ["k", "one_f"], ["k_out"])],
        "inner",
        [vi("j", T.INT64, []), vi("ic", T.BOOL, []), vi("k", T.FLOAT, [])],
        [vi("ic_out", T.BOOL, []), vi("k_out", T.FLOAT, [])],
        [const("one_f", np.float32(1.0))])
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "x"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Add", ["acc", "h_out"], ["acc_out"]),
         helper.make_node("Sub", ["h_out", "h"], ["delta"]),
         helper.make_node("Abs", ["delta"], ["adelta"]),
         helper.make_node("ReduceMax", ["adelta"], ["maxd"], keepdims=0),
         helper.make_node("Greater", ["maxd", "tol"], ["c_out"]),
         helper.make_node("Add", ["i", "one_i"], ["i1"]),
         helper.make_node("Constant", [], ["zero_f"], value=const("zf", np.float32(0.0))),
         helper.make_node("Loop", ["i1", "", "zero_f"], ["count"], body=inner),
         helper.make_node("Add", ["cnt", "count"], ["cnt_out"])],
        "body",
        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("h", T.FLOAT, [n, d]),
         vi("acc", T.FLOAT, [n, d]), vi("cnt", T.FLOAT, [])],
        [vi("c_out", T.BOOL, []), vi("h_out", T.FLOAT, [n, d]), vi("acc_out", T.FLOAT, [n, d]),
         vi("cnt_out", T.FLOAT, [])],
        [const("one_i", np.int64(1))])
    nodes = [
        helper.make_node("MatMul", ["inp", "U"], ["xu"]),
        helper.make_node("Relu", ["xu"], ["x"]),
        helper.make_node("Constant", [], ["yes"], value=const("t", np.array(True))),
        helper.make_node("Constant", [], ["zero"], value=const("z", np.float32(0.0))),
        helper.make_node("Loop", ["steps", "yes", "h0", "acc0", "zero"],
                         ["h_final", "acc_final", "total"], body=body),
        helper.make_node("Softmax", ["h_final"], ["probs"], axis=-1),
        helper.make_node("Mul", ["acc_final", "total"], ["acc_scaled"]),
    ]
    graph = helper.make_graph(
        nodes, "loop_runtime",
        [vi("inp", T.FLOAT, [n, d]), vi("h0", T.FLOAT, [n, d]), vi("acc0", T.FLOAT, [n, d]),
         vi("steps", T.INT64, []), vi("tol", T.FLOAT, [])],
        [vi("probs", T.FLOAT, [n, d]), vi("acc_scaled", T.FLOAT, [n, d]),
         vi("total", T.FLOAT, [])],
        [const("W", w), const("U", u)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aicf gen_loop_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)

    out_dir = os.path.join(ROOT, NAME)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    base = {
        "inp": rng.standard_normal((n, d)).astype(np.float32),
        "h0": rng.standard_normal((n, d)).astype(np.float32),
        "acc0": np.zeros((n, d), np.float32),
    }
    names = [o.name for o in graph.output]
    # Three runs: the trip count ends it, the tolerance ends it, and no iteration at all.
    for case, steps, tol in [("trips", 5, 0.0), ("converges", 200, 1e-3), ("none", 0, 0.0)]:
        inputs = dict(base, steps=np.array(steps, np.int64), tol=np.array(tol, np.float32))
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        outputs = sess.run(None, inputs)
        ref = ReferenceEvaluator(model).run(None, inputs)
        ok = np.allclose(ref[0], outputs[0], 1e-5, 1e-6)
        print(f"  {case}: total {outputs[2]}; onnx.reference's probs {'agree' if ok else 'DIFFER'}")
        cdir = os.path.join(out_dir, case)
        os.makedirs(os.path.join(cdir, "inputs"))
        os.makedirs(os.path.join(cdir, "outputs"))
        for k, a in inputs.items():
            np.save(os.path.join(cdir, "inputs", k + ".npy"), a)
        for k, a in zip(names, outputs):
            np.save(os.path.join(cdir, "outputs", k + ".npy"), a)
    print(f"{NAME}: written to {out_dir}")


if __name__ == "__main__":
    main()
