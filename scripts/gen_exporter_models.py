#!/usr/bin/env python3
"""Networks spelled the way other exporters spell them, for `make bench` (issue 53).

    bench/.venv/bin/python scripts/gen_exporter_models.py OUT_DIR [NAME...]

torch.onnx has one spelling of each layer; converters from other frameworks have others, and a
compiler that recognises ops by name falls off its fast path on them. These networks are written
with onnx's helper API as such converters write them (random weights, fixed seeds):

- paddle_style_detector: a text detector (DB-style) as a Paddle export reads: hard-swish as
  x * Clip(x + 3, 0, 6) / 6 followed by a per-channel scale-and-shift, convolutions with bias and
  BatchNormalization after ConvTranspose, an FPN neck upsampled by Resize (nearest, `scales`
  input, asymmetric / floor) and concatenated.
- tf_style_classifier: a ConvNeXt-like classifier as a TensorFlow export reads: an NHWC input
  transposed to NCHW, 7x7 depthwise convs, LayerNorm over channels spelled Transpose ->
  ReduceMean -> Sub -> Mul -> ReduceMean -> Add -> Sqrt -> Div -> Mul -> Add -> Transpose, GELU
  spelled with Erf, a HardSigmoid squeeze-and-excitation gate, MatMul + Add for the classifier.
- keras_style_segmenter: an encoder-decoder as a Keras export reads: NHWC in and out, swish as
  x * Sigmoid(x), strided convs, Resize (linear, half_pixel, `sizes` input) and Concat skips.
- dcgan_generator: a DCGAN generator as a Keras / TF export reads: a latent vector reshaped to
  1 x 1, ConvTranspose 4x4 (stride 1, then stride 2 with pads 1: overlapping taps), each followed
  by BatchNormalization and ReLU, Tanh at the end.
- pix2pix_decoder: an encoder-decoder with transposed-conv upsampling spelled ConvTranspose 3x3 /
  stride 2 with pads 1 and output_padding 1 (an exact 2x upsampler whose kernel is no multiple
  of its stride), LeakyRelu in the encoder, Concat skips.

The reference outputs come from onnx's reference evaluator (not from a peer the bench times),
with BatchNormalization replaced by an inference-mode one (see the class below).
Each network lands in OUT_DIR/<name>/ with model.onnx, inputs/input.npy, outputs/output.npy.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun


class BatchNormalization(OpRun):
    """Inference-mode BatchNormalization. The reference evaluator's opset 9-13 version fills in
    the `momentum` default and then normalises with the batch's own statistics (training mode)."""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        eps = 1e-5 if epsilon is None else epsilon
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
        return ((y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)


class Builder:
    """Appends nodes and initializers with unique names; weights drawn from one seeded RNG."""

    def __init__(self, seed):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(seed)

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, value, base="c"):
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), nm))
        return nm

    def op(self, op_type, inputs, base=None, **attrs):
        out = self.name(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weight(self, shape, fan_in):
        return self.const((self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), "w")

    def vec(self, n, lo, hi):
        return self.const(self.rng.uniform(lo, hi, n).astype(np.float32), "v")

    def conv(self, x, cin, cout, k, s=1, groups=1, dil=1, bias=True):
        w = self.weight((cout, cin // groups, k, k), cin // groups * k * k)
        ins = [x, w] + ([self.vec(cout, -0.1, 0.1)] if bias else [])
        p = dil * (k // 2)
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p],
                       group=groups, dilations=[dil, dil])

    def bn(self, x, c):
        return self.op("BatchNormalization", [x, self.vec(c, 0.5, 1.5), self.vec(c, -0.2, 0.2),
                                              self.vec(c, -0.5, 0.5), self.vec(c, 0.5, 1.5)],
                       epsilon=1e-5)

    def model(self, inputs, outputs, opset):
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="aicf-gen-exporter-models")
        m.ir_version = 8
        # The output's shape as inference gives it (a converter writes it; the checker wants it).
        inferred = onnx.shape_inference.infer_shapes(m)
        known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for o in m.graph.output:
            if o.name in known and known[o.name].type.tensor_type.HasField("shape"):
                o.type.CopyFrom(known[o.name].type)
        onnx.checker.check_model(m)
        return m


# ------------------------------------------------------------------ paddle-style detector

def paddle_hard_swish(b, x, c):
    """Paddle's hardswish followed by the per-channel scale-and-shift of its `affine` layers."""
    t = b.op("Clip", [b.op("Add", [x, b.const(np.float32(3.0))]), b.const(np.float32(0.0)),
                      b.const(np.float32(6.0))])
    y = b.op("Div", [b.op("Mul", [x, t]), b.const(np.float32(6.0))])
    y = b.op("Mul", [y, b.const(b.rng.uniform(0.5, 1.5, (1, c, 1, 1)).astype(np.float32))])
    return b.op("Add", [y, b.const(b.rng.uniform(-0.2, 0.2, (1, c, 1, 1)).astype(np.float32))])


def upsample(b, x, factor):
    return b.op("Resize", [x, b.const(np.zeros(0, np.float32)),
                           b.const(np.array([1, 1, factor, factor], np.float32))],
                mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def paddle_style_detector():
    b = Builder(11)
    x = "x"
    y = paddle_hard_swish(b, b.conv(x, 3, 16, 3, 2), 16)
    feats, c = [], 16
    for cout in (24, 48, 96, 160):
        y = paddle_hard_swish(b, b.conv(y, c, c, 3, 2, groups=c), c)   # depthwise, stride 2
        y = paddle_hard_swish(b, b.conv(y, c, cout, 1), cout)          # pointwise
        feats.append((y, cout))
        c = cout
    lat = [b.conv(f, ch, 64, 1) for f, ch in feats]
    p = [None] * 4
    p[3] = lat[3]
    for i in (2, 1, 0):
        p[i] = b.op("Add", [lat[i], upsample(b, p[i + 1], 2)])
    outs = [b.conv(p[0], 64, 16, 3)] + [upsample(b, b.conv(p[i], 64, 16, 3), 2 ** i) for i in (1, 2, 3)]
    y = b.op("Concat", outs, axis=1)
    y = b.op("Relu", [b.bn(b.conv(y, 64, 16, 3, bias=False), 16)])
    for cout, last in ((16, False), (1, True)):
        w = b.weight((16, cout, 2, 2), 16 * 4)
        y = b.op("ConvTranspose", [y, w, b.vec(cout, -0.1, 0.1)], kernel_shape=[2, 2], strides=[2, 2])
        y = b.op("Sigmoid", [y]) if last else b.op("Relu", [b.bn(y, cout)])
    shape = [1, 3, 256, 256]
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], 13), shape


# ------------------------------------------------------------------ tf-style classifier

def tf_layer_norm_channels(b, x, c):
    """LayerNorm over the channels of an NCHW tensor as tf2onnx writes it for NHWC Keras code."""
    t = b.op("Transpose", [x], perm=[0, 2, 3, 1])
    mean = b.op("ReduceMean", [t], axes=[-1], keepdims=1)
    d = b.op("Sub", [t, mean])
    var = b.op("ReduceMean", [b.op("Mul", [d, d])], axes=[-1], keepdims=1)
    y = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, b.const(np.float32(1e-6))])])])
    y = b.op("Add", [b.op("Mul", [y, b.vec(c, 0.5, 1.5)]), b.vec(c, -0.2, 0.2)])
    return b.op("Transpose", [y], perm=[0, 3, 1, 2])


def erf_gelu(b, x):
    e = b.op("Erf", [b.op("Div", [x, b.const(np.float32(np.sqrt(2.0)))])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.const(np.float32(1.0))])]),
                        b.const(np.float32(0.5))])


def tf_style_classifier():
    b = Builder(12)
    y = b.op("Transpose", ["x"], perm=[0, 3, 1, 2])
    c = 64
    y = tf_layer_norm_channels(b, b.conv(y, 3, c, 4, 4), c)
    for stage, cout in enumerate((64, 128, 256)):
        if stage:
            y = b.conv(tf_layer_norm_channels(b, y, c), c, cout, 2, 2)
            c = cout
        for _ in range(2):
            r = b.conv(y, c, c, 7, groups=c)
            r = tf_layer_norm_channels(b, r, c)
            r = b.conv(erf_gelu(b, b.conv(r, c, 4 * c, 1)), 4 * c, c, 1)
            g = b.op("ReduceMean", [r], axes=[2, 3], keepdims=1)  # squeeze-and-excitation
            g = b.op("HardSigmoid", [b.conv(b.op("Relu", [b.conv(g, c, c // 4, 1)]), c // 4, c, 1)],
                     alpha=0.2, beta=0.5)
            y = b.op("Add", [y, b.op("Mul", [r, g])])
    y = b.op("Reshape", [b.op("ReduceMean", [y], axes=[2, 3], keepdims=0), b.const(np.array([1, c], np.int64))])
    y = b.op("Add", [b.op("MatMul", [y, b.weight((c, 1000), c)]), b.vec(1000, -0.1, 0.1)])
    shape = [1, 224, 224, 3]
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], 13), shape


# ------------------------------------------------------------------ keras-style segmenter

def swish(b, x):
    return b.op("Mul", [x, b.op("Sigmoid", [x])])


def keras_style_segmenter():
    b = Builder(13)
    y = b.op("Transpose", ["x"], perm=[0, 3, 1, 2])
    skips, c, hw = [], 3, 192
    for cout in (32, 64, 128):
        y = swish(b, b.bn(b.conv(y, c, cout, 3, 2, bias=False), cout))
        y = swish(b, b.bn(b.conv(y, cout, cout, 3, bias=False), cout))
        hw //= 2
        skips.append((y, cout, hw))
        c = cout
    for y_skip, cs, shw in reversed(skips[:-1]):
        size = b.const(np.array([1, c, shw, shw], np.int64))
        y = b.op("Resize", [y, "", "", size], mode="linear", coordinate_transformation_mode="half_pixel")
        y = b.op("Concat", [y, y_skip], axis=1)
        y = swish(b, b.bn(b.conv(y, c + cs, cs, 3, bias=False), cs))
        c = cs
    size = b.const(np.array([1, c, 192, 192], np.int64))
    y = b.op("Resize", [y, "", "", size], mode="linear", coordinate_transformation_mode="half_pixel")
    y = b.op("Transpose", [b.conv(y, c, 5, 1)], perm=[0, 2, 3, 1])
    shape = [1, 192, 192, 3]
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], 13), shape


# ------------------------------------------------------------------ transposed-conv generators

def conv_transpose(b, x, cin, cout, k, s, p, out_pad=0):
    w = b.weight((cin, cout, k, k), cin * k * k // (s * s))
    return b.op("ConvTranspose", [x, w, b.vec(cout, -0.1, 0.1)], kernel_shape=[k, k],
                strides=[s, s], pads=[p, p, p, p], output_padding=[out_pad, out_pad])


def dcgan_generator():
    b = Builder(17)
    y = b.op("Reshape", ["x", b.const(np.array([1, 100, 1, 1], np.int64))])
    y = b.op("Relu", [b.bn(conv_transpose(b, y, 100, 256, 4, 1, 0), 256)])  # 4 x 4
    c = 256
    for cout in (128, 64, 32):                                             # 8, 16, 32
        y = b.op("Relu", [b.bn(conv_transpose(b, y, c, cout, 4, 2, 1), cout)])
        c = cout
    y = b.op("Tanh", [conv_transpose(b, y, c, 3, 4, 2, 1)])               # 64 x 64 x 3
    shape = [1, 100]
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], 13), shape


def pix2pix_decoder():
    b = Builder(19)
    y, skips, c = "x", [], 3
    for cout in (32, 64, 128, 256):
        y = b.op("LeakyRelu", [b.bn(b.conv(y, c, cout, 3, 2, bias=False), cout)], alpha=0.2)
        skips.append((y, cout))
        c = cout
    for y_skip, cs in reversed(skips[:-1]):
        y = b.op("Relu", [b.bn(conv_transpose(b, y, c, cs, 3, 2, 1, 1), cs)])
        y = b.op("Concat", [y, y_skip], axis=1)
        c = 2 * cs
    y = b.op("Tanh", [conv_transpose(b, y, c, 3, 3, 2, 1, 1)])
    shape = [1, 3, 128, 128]
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], 13), shape


NETWORKS = {
    "paddle_style_detector": paddle_style_detector,
    "tf_style_classifier": tf_style_classifier,
    "keras_style_segmenter": keras_style_segmenter,
    "dcgan_generator": dcgan_generator,
    "pix2pix_decoder": pix2pix_decoder,
}


def export(out_root, name):
    out_dir = os.path.join(out_root, name)
    path = os.path.join(out_dir, "model.onnx")
    if os.path.exists(path):
        print(f"{name}: {path} exists, kept")
        return
    m, shape = NETWORKS[name]()
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    (y,) = ReferenceEvaluator(m, new_ops=[BatchNormalization]).run(None, {"x": x})
    os.makedirs(os.path.join(out_dir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "outputs"), exist_ok=True)
    np.save(os.path.join(out_dir, "inputs", "x.npy"), x)
    np.save(os.path.join(out_dir, "outputs", m.graph.output[0].name + ".npy"), y.astype(np.float32))
    onnx.save(m, path + ".tmp")
    os.replace(path + ".tmp", path)  # last, so an interrupted run is redone, never half-used
    print(f"{name}: written to {path} ({os.path.getsize(path)} bytes)")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    names = sys.argv[2:] or list(NETWORKS)
    unknown = [n for n in names if n not in NETWORKS]
    if unknown:
        sys.exit(f"gen_exporter_models.py: unknown network(s) {unknown}; known: {list(NETWORKS)}")
    for n in names:
        export(sys.argv[1], n)


if __name__ == "__main__":
    main()
