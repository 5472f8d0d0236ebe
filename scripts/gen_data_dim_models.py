#!/usr/bin/env python3
"""Writes testdata/data_dims/<name>: small models whose outputs' lengths are known only at run
time (issue 51, item 3), written with onnx's helper API as exporters spell them, each with cases
(case<k>/<input>.npy and the reference outputs <output>.npy from ONNX Runtime) whose lengths
differ, including an empty result:

  nonzero_mask   x f32[3,5] -> NonZero(x > 0.3) i64[2,n], its transpose, and Shape as a count
  compress_rows  boxes f32[12,4], scores f32[12] -> Compress by scores > 0.5 along axis 0, and the
                 kept scores through Compress without an axis (the flattened input)
  topk_runtime_k x f32[2,20], k i64[1] (an input) -> TopK values and indices [2,k]
  nms_gather     boxes f32[1,16,4], scores f32[1,3,16] -> NonMaxSuppression (at most 4 per
                 class, IoU 0.5, score 0.2), then the kept boxes gathered by the selected rows'
                 box column: the post-processing of a detector
  unique_labels  logits f32[20,5], rows f32[8,2] -> the distinct ArgMax labels (Unique sorted:
                 values, first indices, inverse, counts, as torch.unique(..., return_inverse,
                 return_counts) exports it) and the distinct rows (Unique along axis 0 in order
                 of first occurrence, and their counts)
  loop_scan      x f32[4], limit f32[], go bool[] -> a Loop (trip count 64, the condition
                 computed by the body: a while loop as exporters write one) whose scan output
                 stacks each iteration's value: as long as the iterations run (0 when go is false)

Run by hand (the bench virtual environment has ONNX Runtime):
    bench/.venv/bin/python scripts/gen_data_dim_models.py
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "data_dims")
vi = helper.make_tensor_value_info


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, graph, cases, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="aicf-gen-data-dims")
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(ROOT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    for k, feeds in enumerate(cases):
        cd = os.path.join(d, f"case{k}")
        os.makedirs(cd)
        for n, a in feeds.items():
            np.save(os.path.join(cd, n + ".npy"), a)
        for n, a in zip(outs, sess.run(None, feeds)):
            np.save(os.path.join(cd, n + ".npy"), a)
        shapes = {n: list(a.shape) for n, a in zip(outs, sess.run(None, feeds))}
        print(name, f"case{k}", shapes)


def nonzero_mask(rng):
    g = helper.make_graph(
        [helper.make_node("Greater", ["x", "t"], ["mask"]),
         helper.make_node("NonZero", ["mask"], ["idx"]),
         helper.make_node("Transpose", ["idx"], ["idx_t"], perm=[1, 0]),
         helper.make_node("Shape", ["idx"], ["shape"]),
         helper.make_node("Gather", ["shape", "one"], ["count"], axis=0)],
        "nonzero_mask", [vi("x", T.FLOAT, [3, 5])],
        [vi("idx", T.INT64, [2, "n"]), vi("idx_t", T.INT64, ["n", 2]), vi("count", T.INT64, [])],
        [const("t", np.float32(0.3)), const("one", np.int64(1))])
    x = rng.random((3, 5), dtype=np.float32)
    save("nonzero_mask", g, [{"x": x}, {"x": x - 0.5}, {"x": np.zeros((3, 5), np.float32)}])


def compress_rows(rng):
    g = helper.make_graph(
        [helper.make_node("Greater", ["scores", "t"], ["keep"]),
         helper.make_node("Compress", ["boxes", "keep"], ["kept_boxes"], axis=0),
         helper.make_node("Compress", ["scores", "keep"], ["kept_scores"]),
         helper.make_node("Mul", ["kept_scores", "two"], ["kept_scores2"])],
        "compress_rows", [vi("boxes", T.FLOAT, [12, 4]), vi("scores", T.FLOAT, [12])],
        [vi("kept_boxes", T.FLOAT, ["n", 4]), vi("kept_scores2", T.FLOAT, ["n"])],
        [const("t", np.float32(0.5)), const("two", np.float32(2.0))])
    b = rng.random((12, 4), dtype=np.float32)
    s = rng.random(12, dtype=np.float32)
    save("compress_rows", g, [{"boxes": b, "scores": s}, {"boxes": b, "scores": s * 0.6},
                              {"boxes": b, "scores": s * 0.0}])


def topk_runtime_k(rng):
    g = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1)],
        "topk_runtime_k", [vi("x", T.FLOAT, [2, 20]), vi("k", T.INT64, [1])],
        [vi("values", T.FLOAT, [2, "k"]), vi("indices", T.INT64, [2, "k"])])
    x = rng.standard_normal((2, 20)).astype(np.float32)
    save("topk_runtime_k", g, [{"x": x, "k": np.array([3], np.int64)},
                               {"x": x, "k": np.array([20], np.int64)},
                               {"x": x, "k": np.array([0], np.int64)}])


def nms_gather(rng):
    g = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_per", "iou", "score_th"],
                          ["selected"]),
         helper.make_node("Gather", ["selected", "two"], ["box_ids"], axis=1),
         helper.make_node("Squeeze", ["boxes", "zero"], ["boxes2"]),
         helper.make_node("Gather", ["boxes2", "box_ids"], ["kept"], axis=0)],
        "nms_gather", [vi("boxes", T.FLOAT, [1, 16, 4]), vi("scores", T.FLOAT, [1, 3, 16])],
        [vi("selected", T.INT64, ["n", 3]), vi("kept", T.FLOAT, ["n", 4])],
        [const("max_per", np.array([4], np.int64)), const("iou", np.array([0.5], np.float32)),
         const("score_th", np.array([0.2], np.float32)), const("two", np.int64(2)),
         const("zero", np.array([0], np.int64))])

    def boxes():
        # Clusters of overlapping boxes [y1, x1, y2, x2] so that suppression happens.
        centers = rng.random((4, 2), dtype=np.float32) * 10
        c = centers[rng.integers(0, 4, 16)] + rng.standard_normal((16, 2)).astype(np.float32) * .3
        size = 1 + rng.random((16, 2), dtype=np.float32)
        return np.concatenate([c - size / 2, c + size / 2], axis=1)[None].astype(np.float32)

    s = rng.random((1, 3, 16), dtype=np.float32)
    save("nms_gather", g, [{"boxes": boxes(), "scores": s},
                           {"boxes": boxes(), "scores": s * 0.3},
                           {"boxes": boxes(), "scores": s * 0.1}])


def unique_labels(rng):
    g = helper.make_graph(
        [helper.make_node("ArgMax", ["logits"], ["labels"], axis=1, keepdims=0),
         helper.make_node("Unique", ["labels"], ["classes", "first", "inverse", "counts"],
                          sorted=1),
         helper.make_node("Unique", ["rows"], ["distinct", "", "", "row_counts"], axis=0,
                          sorted=0)],
        "unique_labels", [vi("logits", T.FLOAT, [20, 5]), vi("rows", T.FLOAT, [8, 2])],
        [vi("classes", T.INT64, ["n"]), vi("first", T.INT64, ["n"]),
         vi("inverse", T.INT64, [20]), vi("counts", T.INT64, ["n"]),
         vi("distinct", T.FLOAT, ["m", 2]), vi("row_counts", T.INT64, ["m"])])
    logits = rng.standard_normal((20, 5)).astype(np.float32)
    rows = rng.integers(0, 2, (8, 2)).astype(np.float32)
    one = np.zeros((20, 5), np.float32)
    one[:, 3] = 1.0  # one class everywhere, one row repeated
    save("unique_labels", g, [{"logits": logits, "rows": rows},
                              {"logits": one, "rows": np.ones((8, 2), np.float32)},
                              {"logits": logits * -1.0,
                               "rows": np.arange(16, dtype=np.float32).reshape(8, 2)}])


def loop_scan(rng):
    body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "k"], ["v1"]),
         helper.make_node("Add", ["v1", "x"], ["v_out"]),
         helper.make_node("ReduceMax", ["v_out"], ["top"], keepdims=0),
         helper.make_node("Less", ["top", "limit"], ["c_out"]),
         helper.make_node("Mul", ["v_out", "v_out"], ["sq"])],
        "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("v_in", T.FLOAT, [4])],
        [vi("c_out", T.BOOL, []), vi("v_out", T.FLOAT, [4]), vi("sq", T.FLOAT, [4])],
        [const("k", np.float32(0.9))])
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "x"], ["v", "squares"], body=body)],
        "loop_scan", [vi("x", T.FLOAT, [4]), vi("limit", T.FLOAT, []), vi("go", T.BOOL, [])],
        [vi("v", T.FLOAT, [4]), vi("squares", T.FLOAT, ["n", 4])],
        [const("trips", np.int64(64))])
    x = rng.random(4, dtype=np.float32) + 0.5
    save("loop_scan", g, [{"x": x, "limit": np.array(5.0, np.float32), "go": np.array(True)},
                          {"x": x, "limit": np.array(1e30, np.float32), "go": np.array(True)},
                          {"x": x, "limit": np.array(20.0, np.float32), "go": np.array(False)}])


def main():
    rng = np.random.default_rng(51)
    nonzero_mask(rng)
    compress_rows(rng)
    topk_runtime_k(rng)
    nms_gather(rng)
    unique_labels(rng)
    loop_scan(rng)


if __name__ == "__main__":
    main()
