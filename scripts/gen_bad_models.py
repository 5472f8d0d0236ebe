#!/usr/bin/python3
"""Generates the bad-model corpus in testdata/bad/ and its expected messages.

Each model is small and wrong in exactly one way; testdata/bad/expected.txt holds
"FILE<TAB>expected substring of the error" lines, checked by tests/unit/test_importer.cpp
(every import must fail with exit code 2, or 1 for an unreadable file, naming the file).

Run by hand with Debian's python3-onnx and commit the output:
    /usr/bin/python3 scripts/gen_bad_models.py
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "bad")
EXPECTED = []


def model(nodes, inputs, outputs, initializers=(), opset=17, domains=(), ir_version=8):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=imports, producer_name="gen_bad_models")
    m.ir_version = ir_version
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(name, m_or_bytes, expected):
    path = os.path.join(OUT, name)
    data = m_or_bytes if isinstance(m_or_bytes, bytes) else m_or_bytes.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    EXPECTED.append((name, expected))


def external(name, location, offset=None, length=None, shape=(4,)):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, str(value)
    return t


def external_model(location, offset=None, length=None):
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [f32("x", [4])], [f32("y", [4])], [external("w", location, offset, length)])


def clear():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".onnx") or f.endswith(".bin") or f == "expected.txt":
            os.remove(os.path.join(OUT, f))


def main():
    good = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                 [f32("x", [2, 8])], [f32("y", [2, 8])],
                 [numpy_helper.from_array(np.ones((8, 8), np.float32), "w")])
    data = good.SerializeToString()

    # --- not a model at all ----------------------------------------------------------------------
    save("truncated.onnx", data[: len(data) // 2], "not an ONNX model")
    save("not_protobuf.onnx", b"this is a text file, not an ONNX model\n", "not an ONNX model")
    save("empty.onnx", b"", "not an ONNX model (it has no graph)")
    EXPECTED.append(("does_not_exist.onnx", "cannot open"))

    # --- structure -------------------------------------------------------------------------------
    save("cycle.onnx",
         model([helper.make_node("Add", ["x", "b"], ["a"], name="A"),
                helper.make_node("Relu", ["a"], ["b"], name="B"),
                helper.make_node("Relu", ["a"], ["y"], name="C")],
               [f32("x", [4])], [f32("y", [4])]),
         "the graph has a cycle: 'A' -> 'B' -> 'A'")
    save("missing_initializer.onnx",
         model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
               [f32("x", [2, 8])], [f32("y", [2, 8])]),
         "node 'mm' (MatMul): input 'w' is not a graph input, initializer or node output")
    save("missing_input.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [], [f32("y", [4])]),
         "node 'relu' (Relu): input 'x' is not a graph input, initializer or node output")
    save("missing_output.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [f32("x", [4])], [f32("z", [4])]),
         "graph output 'z' is not a graph input, initializer or node output")
    save("no_outputs.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [f32("x", [4])], []),
         "the graph has no outputs (nothing to compute)")
    save("duplicate_value.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="r1"),
                helper.make_node("Neg", ["x"], ["y"], name="r2")],
               [f32("x", [4])], [f32("y", [4])]),
         "value 'y' is defined more than once (again by node 'r2')")
    save("unknown_domain.onnx",
         model([helper.make_node("FusedMatMul", ["x", "x"], ["y"], name="fmm",
                                 domain="com.microsoft")],
               [f32("x", [4, 4])], [f32("y", [4, 4])], domains=["com.microsoft"]),
         "1 op is in an unknown domain (only the default ONNX domain is supported): "
         "com.microsoft::FusedMatMul (1: 'fmm')")
    save("unsupported_ops.onnx",
         model([helper.make_node("Det", ["x"], ["v1"], name="det_1"),
                helper.make_node("Det", ["x"], ["v2"], name="det_2"),
                helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="nms_0"),
                helper.make_node("Add", ["v1", "v2"], ["y"], name="add")],
               [f32("x", [3, 4, 4]), f32("boxes", [1, 3, 4]), f32("scores", [1, 1, 3])],
               [f32("y", None), helper.make_tensor_value_info("sel", TensorProto.INT64, None)]),
         "2 unsupported ops: Det (2: 'det_1', 'det_2')")
    save("opset_too_new.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [f32("x", [4])], [f32("y", [4])], opset=30),
         "opset 30 is not supported")

    # --- dtypes ----------------------------------------------------------------------------------
    save("dtype_complex128_input.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [helper.make_tensor_value_info("x", TensorProto.COMPLEX128, [4])],
               [helper.make_tensor_value_info("y", TensorProto.COMPLEX128, [4])]),
         "input 'x' has unsupported dtype complex128")
    save("dtype_complex_input.onnx",
         model([helper.make_node("Identity", ["x"], ["y"], name="id")],
               [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [4])],
               [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [4])]),
         "input 'x' has unsupported dtype complex64")
    s = helper.make_tensor("s", TensorProto.STRING, [1], [b"hello"])
    save("dtype_string_initializer.onnx",
         model([helper.make_node("Identity", ["s"], ["y"], name="id")], [],
               [helper.make_tensor_value_info("y", TensorProto.STRING, [1])], [s]),
         "initializer 's' has unsupported dtype string")
    save("dtype_cast_string.onnx",
         model([helper.make_node("Cast", ["x"], ["c"], name="to_string", to=TensorProto.STRING),
                helper.make_node("Cast", ["c"], ["y"], name="back", to=TensorProto.FLOAT)],
               [f32("x", [4])], [f32("y", [4])]),
         "node 'to_string' (Cast): cast to string is not supported")

    # --- the ONNX checker ------------------------------------------------------------------------
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [f32("x", [4])],
              [f32("y", [4])])
    m.ClearField("ir_version")
    save("checker_no_ir_version.onnx", m,
         "the ONNX checker rejects the model: The model does not have an ir_version set properly")
    save("checker_bad_attribute.onnx",
         model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[1.0, 1.0])],
               [f32("x", [1, 1, 4, 4])], [f32("y", [1, 1, 4, 4])],
               [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")]),
         "the ONNX checker rejects the model: Mismatched attribute type in 'conv : strides'")

    # --- conversion ------------------------------------------------------------------------------
    save("non_constant_shape.onnx",
         model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="/attn/Reshape_1")],
               [f32("x", [2, 8]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
               [f32("y", [4, 4])]),
         "node '/attn/Reshape_1' (Reshape): shape input 'shape' is not a compile-time constant (a graph input: bind it with --const shape=FILE.npy)")
    save("unbound_dims.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [f32("x", ["batch", "seq", 16])], [f32("y", ["batch", "seq", 16])]),
         "2 unbound dynamic dim(s), bind each with the flag shown: 'batch' (input 'x' dim 0): "
         "--dim batch=N; 'seq' (input 'x' dim 1): --dim seq=N")
    save("resize_tf_crop.onnx",
         model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="up", mode="linear",
                                 coordinate_transformation_mode="tf_crop_and_resize")],
               [f32("x", [1, 1, 2, 2]), f32("roi", [8])], [f32("y", [1, 1, 4, 4])],
               [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]),
         "node 'up' (Resize): roi input 'roi' is not a compile-time constant (a graph input: bind "
         "it with --const roi=FILE.npy)")

    # --- window attributes (libonnx's shape inference divides by strides: checked before it) ------
    x4, y4 = f32("x", [1, 1, 8, 8]), f32("y", ["n", "c", "h", "w"])
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    save("conv_zero_stride.onnx",
         model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[0, 1])],
               [x4], [y4], [w]),
         "node 'conv' (Conv): attribute 'strides' is [0,1]: each value must be >= 1")
    save("maxpool_zero_stride.onnx",
         model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                 strides=[1, 0])], [x4], [y4]),
         "node 'pool' (MaxPool): attribute 'strides' is [1,0]: each value must be >= 1")
    save("avgpool_negative_stride.onnx",
         model([helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                 strides=[-1, 1])], [x4], [y4]),
         "node 'pool' (AveragePool): attribute 'strides' is [-1,1]: each value must be >= 1")
    save("maxpool_ceil_zero_stride.onnx",
         model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                 ceil_mode=1, strides=[0, 0])], [x4], [y4]),
         "node 'pool' (MaxPool): attribute 'strides' is [0,0]: each value must be >= 1")
    save("conv_zero_dilation.onnx",
         model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", dilations=[1, 0])],
               [x4], [y4], [w]),
         "node 'conv' (Conv): attribute 'dilations' is [1,0]: each value must be >= 1")
    save("conv_short_strides.onnx",
         model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3],
                                 strides=[1])], [x4], [y4], [w]),
         "node 'conv' (Conv): attribute 'strides' has 1 values, kernel_shape implies 2")
    save("conv_negative_pads.onnx",
         model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[0, -1, 0, 0])],
               [x4], [y4], [w]),
         "node 'conv' (Conv): attribute 'pads' is [0,-1,0,0]: each value must be >= 0")
    save("convtranspose_zero_stride.onnx",
         model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[0, 2])],
               [x4], [y4], [w]),
         "node 'up' (ConvTranspose): attribute 'strides' is [0,2]: each value must be >= 1")
    save("maxpool_zero_kernel.onnx",
         model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[0, 2])],
               [x4], [y4]),
         "node 'pool' (MaxPool): attribute 'kernel_shape' is [0,2]: each value must be >= 1")

    # --- size limits and empty tensors -----------------------------------------------------------
    save("input_too_large.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [f32("x", [2**32, 2**32, 4])], [f32("y", [2**32, 2**32, 4])]),
         "input 'x' f32[4294967296,4294967296,4] has more than 2^63 elements, above the limit of "
         "2147483647 per tensor")
    save("input_4e18_bytes.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [f32("x", [10**9, 10**9, 4])], [f32("y", [10**9, 10**9, 4])]),
         "input 'x' f32[1000000000,1000000000,4] has 4000000000000000000 elements, above the "
         "limit of 2147483647 per tensor")
    save("expand_too_large.onnx",
         model([helper.make_node("Expand", ["x", "s"], ["y"], name="grow")],
               [f32("x", [1, 8])], [f32("y", [2**32, 8])],
               [numpy_helper.from_array(np.array([2**32, 8], np.int64), "s")]),
         "node 'grow' (Expand): result f32[4294967296,8] has 34359738368 elements, above the "
         "limit of 2147483647 per tensor")
    save("pad_overflow.onnx",
         model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
               [f32("x", [4, 4])], [f32("y", ["a", "b"])],
               [numpy_helper.from_array(np.array([2**62, 0, 2**62, 0], np.int64), "p")]),
         "node 'pad' (Pad): pad result size overflows (4611686018427387904 + 4611686018427387904)")
    save("constant_of_shape_too_large.onnx",
         model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
               [f32("y", ["a", "b"])],
               [numpy_helper.from_array(np.array([2**40, 2**40], np.int64), "s")]),
         "node 'fill' (ConstantOfShape): result f32[1099511627776,1099511627776] has more than "
         "2^63 elements")
    # Constants computed at import are bounded in bytes: a few bytes of model must not make the
    # importer allocate gigabytes (a large ConstantOfShape is a broadcast instead, not an error).
    save("range_too_large.onnx",
         model([helper.make_node("Range", ["a", "b", "d"], ["y"], name="ids")], [],
               [helper.make_tensor_value_info("y", TensorProto.INT64, [2**30])],
               [numpy_helper.from_array(np.array(0, np.int64), "a"),
                numpy_helper.from_array(np.array(2**30, np.int64), "b"),
                numpy_helper.from_array(np.array(1, np.int64), "d")]),
         "node 'ids' (Range): result i64[1073741824] would be a constant of 8589934592 bytes "
         "computed at import, above the limit of 268435456")
    # dims of 2^30 floats and no data: the count is checked before anything is allocated.
    hollow = TensorProto()
    hollow.name = "w"
    hollow.data_type = TensorProto.FLOAT
    hollow.dims.extend([2**30])
    save("initializer_without_data.onnx",
         model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
               [f32("x", [2**30])], [f32("y", [2**30])], [hollow]),
         "initializer 'w' has 0 values in float_data, expected 1073741824")
    # (Empty tensors are accepted since issue 20: an empty input is a constant holding no values,
    # and what computes an empty result folds to one.)

    # --- external data ---------------------------------------------------------------------------
    with open(os.path.join(OUT, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    save("external_absolute.onnx", external_model("/etc/passwd"),
         "initializer 'w' external data location '/etc/passwd' is an absolute path")
    save("external_dotdot.onnx", external_model("../bad/weights.bin"),
         "initializer 'w' external data location '../bad/weights.bin' leaves the model's folder")
    link = os.path.join(OUT, "escape_link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("/etc/passwd", link)
    save("external_symlink.onnx", external_model("escape_link.bin"),
         "external data location 'escape_link.bin' resolves to '/etc/passwd', outside the "
         "model's folder")
    save("external_offset.onnx", external_model("weights.bin", offset=4096),
         "external data range [4096, 4096 + 16) is beyond the end of 'weights.bin' (16 bytes)")
    save("external_length.onnx", external_model("weights.bin", offset=8, length=16),
         "external data range [8, 8 + 16) is beyond the end of 'weights.bin' (16 bytes)")
    save("external_missing.onnx", external_model("no_such_file.bin"),
         "cannot open external data file")

    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        f.write("# Bad models and a substring of the error each must give (generated by\n"
                "# scripts/gen_bad_models.py; checked by tests/unit/test_importer.cpp).\n")
        for name, expected in EXPECTED:
            f.write(f"{name}\t{expected}\n")
    print(f"wrote {len(EXPECTED)} cases to {os.path.normpath(OUT)}", file=sys.stderr)


def quant_cases():
    """Quantized ops given what their definitions do not allow (frontend/onnx_ops_quant.cpp)."""
    def t(name, dtype, shape):
        return helper.make_tensor_value_info(name, dtype, shape)

    scale = numpy_helper.from_array(np.float32(0.5), "s")
    save("quant_matmulinteger_uint16.onnx",
         model([helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mmi")],
               [t("a", TensorProto.UINT16, [2, 3]), t("b", TensorProto.UINT8, [3, 4])],
               [t("y", TensorProto.INT32, [2, 4])]),
         "node 'mmi' (MatMulInteger): a has element type u16: must be uint8 or int8")
    save("quant_dequantize_scale_shape.onnx",
         model([helper.make_node("DequantizeLinear", ["x", "s4"], ["y"], name="dq")],
               [t("x", TensorProto.UINT8, [2, 3])], [f32("y", [2, 3])],
               [numpy_helper.from_array(np.ones(4, np.float32), "s4")]),
         "node 'dq' (DequantizeLinear): x_scale f32[4] is neither a scalar nor 1-D of the 3 "
         "elements on axis 1")
    save("quant_dequantize_int32_zero_point.onnx",
         model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")],
               [t("x", TensorProto.INT32, [4])], [f32("y", [4])],
               [scale, numpy_helper.from_array(np.int32(3), "z")]),
         "node 'dq' (DequantizeLinear): an int32 input's zero point must be absent or 0")
    save("quant_quantize_zero_point_type.onnx",
         model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")],
               [f32("x", [4])], [t("y", TensorProto.INT32, [4])],
               [scale, numpy_helper.from_array(np.int32(3), "z")]),
         "node 'q' (QuantizeLinear): the output has element type i32: quantized values must be "
         "uint8, int8, uint16 or int16")


if __name__ == "__main__":
    clear()
    quant_cases()
    main()
