#!/usr/bin/python3
"""Generates testdata/layout/: small models for the producer side of layout folding (issue 17;
golden testdata/ir/cli/layout_stores.mcir). Each folder holds model.onnx, inputs/*.npy and the
numpy reference outputs/*.npy that aicf-run --reference checks.

  stores: a concat filled by four producers (an exp, a matmul with its bias, and two values of
          one elementwise kernel) read by a layer norm; a concat that is a graph output; a
          transpose of a matmul's result that is a graph output (a strided store).
  padded_windows: explicit Pad nodes read by windows, as exporters spell a padded window
          (fold-pad; golden testdata/ir/cli/fold_pad_e2e.mcir): torch's avg_pool2d with
          count_include_pad (Pad 1 -> AveragePool 3x3), TF's SAME padding of a stride-2 conv
          (Pad 0 / 1 -> Conv), a -inf Pad before a MaxPool, between channel-blocked convs.
  dense_block: a DenseNet dense block and transition as torch exports them (golden
          testdata/ir/cli/bn_relu_prologue_e2e.mcir): each layer's BatchNormalization -> Relu of
          the concat of all earlier features before its 1 x 1 conv, the transition's BN -> ReLU
          -> 1 x 1 conv -> 2 x 2 average pool.

Run by hand with Debian's python3-onnx and commit the output (names: only those folders):
    /usr/bin/python3 scripts/gen_layout_models.py [NAME...]
"""
import os
import sys

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


def conv2d(x, w, b, stride=1):
    """Cross-correlation of an unpadded x [N, C, H, W] with w [M, C, kh, kw], plus b."""
    m, _, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def pool2d(x, k, stride, reduce):
    """Pools of an unpadded x over k x k windows (reduce: np.mean or np.max over the taps)."""
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    taps = [x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            for i in range(k) for j in range(k)]
    return reduce(np.stack(taps), axis=0)


def padded_windows(rng):
    f = np.float32
    x = rng.standard_normal((1, 3, 18, 18)).astype(f)
    w0 = (rng.standard_normal((32, 3, 3, 3)) * 0.3).astype(f)
    b0 = rng.standard_normal((32,)).astype(f)
    w1 = (rng.standard_normal((32, 32, 1, 1)) * 0.2).astype(f)
    b1 = rng.standard_normal((32,)).astype(f)
    w2 = (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(f)
    b2 = rng.standard_normal((48,)).astype(f)
    pads = lambda before, after: [0, 0, before, before, 0, 0, after, after]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        # torch: F.avg_pool2d(r0, 3, 1, 1), count_include_pad=True
        helper.make_node("Pad", ["r0", "p1"], ["pd1"], mode="constant"),
        helper.make_node("AveragePool", ["pd1"], ["ap"], kernel_shape=[3, 3]),
        helper.make_node("Conv", ["ap", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        # TF: a stride-2 3x3 conv with SAME padding on 18 pixels (0 before, 1 after)
        helper.make_node("Pad", ["r1", "p01", "zero"], ["pd2"], mode="constant"),
        helper.make_node("Conv", ["pd2", "w2", "b2"], ["c2"], strides=[2, 2]),
        # a max pool padded by a -inf Pad
        helper.make_node("Pad", ["c2", "p1", "ninf"], ["pd3"], mode="constant"),
        helper.make_node("MaxPool", ["pd3"], ["y"], kernel_shape=[3, 3], strides=[2, 2]),
    ]
    x64 = x.astype(np.float64)
    r0 = np.maximum(conv2d(np.pad(x64, ((0, 0), (0, 0), (1, 1), (1, 1))), w0, b0), 0)
    ap = pool2d(np.pad(r0, ((0, 0), (0, 0), (1, 1), (1, 1))), 3, 1, np.mean)
    r1 = np.maximum(conv2d(ap, w1, b1), 0)
    c2 = conv2d(np.pad(r1, ((0, 0), (0, 0), (0, 1), (0, 1))), w2, b2, stride=2)
    y = pool2d(np.pad(c2, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf), 3, 2,
               np.max).astype(f)
    weights = [("w0", w0), ("b0", b0), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2),
               ("p1", np.array(pads(1, 1), np.int64)), ("p01", np.array(pads(0, 1), np.int64)),
               ("zero", np.array(0, f)), ("ninf", np.array(-np.inf, f))]
    save("padded_windows", nodes, [("x", x)], weights, [("y", y)])


def dense_block(rng):
    f = np.float32
    x = rng.standard_normal((1, 3, 16, 16)).astype(f)
    weights, nodes = [], []

    def param(name, shape, scale):
        a = (rng.standard_normal(shape) * scale).astype(f)
        weights.append((name, a))
        return a

    def conv(src, out, cin, cout, k, relu=True):
        w = param(f"{out}_w", (cout, cin, k, k), 1.0 / np.sqrt(cin * k * k))
        b = param(f"{out}_b", (cout,), 0.1)
        p = k // 2
        nodes.append(helper.make_node("Conv", [src, f"{out}_w", f"{out}_b"], [out + "_c" if relu else out],
                                      pads=[p] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [out + "_c"], [out]))
        return lambda v: (np.maximum if relu else (lambda a, _: a))(
            conv2d(np.pad(v, ((0, 0), (0, 0), (p, p), (p, p))), w, b), 0)

    def bn_relu(src, out, c):
        s = (rng.uniform(0.5, 1.5, c)).astype(f)
        o = (rng.uniform(-0.5, 0.5, c)).astype(f)
        m = (rng.uniform(-0.2, 0.2, c)).astype(f)
        v = (rng.uniform(0.5, 2.0, c)).astype(f)
        names = [f"{out}_{k}" for k in "somv"]
        weights.extend(zip(names, (s, o, m, v)))
        nodes.append(helper.make_node("BatchNormalization", [src] + names, [out + "_n"],
                                      epsilon=1e-5))
        nodes.append(helper.make_node("Relu", [out + "_n"], [out]))
        r = lambda a: a.reshape(1, -1, 1, 1).astype(np.float64)
        return lambda t: np.maximum((t - r(m)) / np.sqrt(r(v) + 1e-5) * r(s) + r(o), 0)

    x64 = x.astype(np.float64)
    feats = [conv("x", "f0", 3, 32, 3)(x64)]
    names = ["f0"]
    growth, width = 16, 64
    for i in range(1, 4):  # three dense layers: 32 -> 48 -> 64 -> 80 channels
        cin = 32 + (i - 1) * growth
        src = names[0] if i == 1 else f"cat{i - 1}"
        t = feats[0] if i == 1 else np.concatenate(feats, axis=1)
        t = bn_relu(src, f"l{i}_bn", cin)(t)
        t = conv(f"l{i}_bn", f"l{i}_a", cin, width, 1)(t)
        t = conv(f"l{i}_a", f"l{i}_b", width, growth, 3, relu=False)(t)
        feats.append(t)
        names.append(f"l{i}_b")
        nodes.append(helper.make_node("Concat", list(names), [f"cat{i}"], axis=1))
    t = bn_relu("cat3", "tr_bn", 80)(np.concatenate(feats, axis=1))
    t = conv("tr_bn", "tr", 80, 48, 1, relu=False)(t)
    nodes.append(helper.make_node("AveragePool", ["tr"], ["y"], kernel_shape=[2, 2], strides=[2, 2]))
    y = pool2d(t, 2, 2, np.mean).astype(f)
    save("dense_block", nodes, [("x", x)], weights, [("y", y)])


def main():
    names = sys.argv[1:] or ["stores", "padded_windows", "dense_block"]
    if "padded_windows" in names:
        padded_windows(np.random.default_rng(53))
    if "dense_block" in names:
        dense_block(np.random.default_rng(121))
    if "stores" in names:
        stores()


def stores():
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
