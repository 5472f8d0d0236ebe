#!/usr/bin/env python3
"""Writes testdata/if_branch/vad_if_op17: a voice-activity model shaped like Silero VAD (issue 51,
item 2), whose If on the sample rate has a branch that cannot take the other rate's chunk shape,
plus two streams of chunks (16 and 8 kHz) with reference outputs, the state carried from chunk to
chunk. The references come from ONNX Runtime when it is importable, else from
onnx.reference.ReferenceEvaluator (onnx >= 1.13); the script says which.

Run by hand (the bench virtual environment has ONNX Runtime; Debian's python3-onnx 1.12 builds
the model but has neither):
    bench/.venv/bin/python scripts/gen_if_branch_model.py

The graph: inputs `input` f32[1, N] (N a named dim, unknown in the model), `state` f32[2,1,128]
(an LSTM's h and c), `sr` i64 (0-d). If(sr == 16000):
  then (16 kHz, N = 576): Reshape to [1,4,144] (4 frames), MatMul [144,16] + Relu, Transpose to
    [4,1,16] (a sequence), LSTM (hidden 128) from the state;
  else (8 kHz, N = 288): Reshape to [1,4,72,-1], Squeeze (every unit dim), Unsqueeze axis 1,
    Slice the last axis to 16 features, times 0.5, the same LSTM. At N = 576 the -1 is 2, the
    Squeeze keeps it, and the LSTM gets f32[4,1,72,2]: rank 4, as Silero's 8 kHz branch gives its
    LSTM a rank-5 tensor at the 16 kHz shape.
Both branches then give output = sigmoid(Y_h @ D + d) as [1,1] and stateN = concat(Y_h, Y_c).
The weights are the outer graph's initializers, read by both branches (about 300 KB).
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "if_branch")
NAME = "vad_if_op17"
HIDDEN, FEAT, CHUNKS = 128, 16, 8


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def lstm_tail(p):
    """The nodes both branches end with: LSTM over `{p}seq` [4,1,16] from the state, then the
    output and the next state (names prefixed by p)."""
    return [
        helper.make_node("Slice", ["state", "s0", "s1", "ax0"], [p + "h0"]),
        helper.make_node("Slice", ["state", "s1", "s2", "ax0"], [p + "c0"]),
        helper.make_node("LSTM", [p + "seq", "W", "R", "B", "", p + "h0", p + "c0"],
                         ["", p + "yh", p + "yc"], hidden_size=HIDDEN, name=p + "LSTM"),
        helper.make_node("Reshape", [p + "yh", "flat"], [p + "h"]),
        helper.make_node("MatMul", [p + "h", "D"], [p + "logit0"]),
        helper.make_node("Add", [p + "logit0", "d"], [p + "logit"]),
        helper.make_node("Sigmoid", [p + "logit"], [p + "out"]),
        helper.make_node("Concat", [p + "yh", p + "yc"], [p + "stateN"], axis=0),
    ]


def build_model(rng):
    vi = helper.make_tensor_value_info
    then_nodes = [
        helper.make_node("Reshape", ["input", "shape16"], ["t_frames"]),
        helper.make_node("MatMul", ["t_frames", "E"], ["t_feat0"]),
        helper.make_node("Relu", ["t_feat0"], ["t_feat"]),
        helper.make_node("Transpose", ["t_feat"], ["t_seq"], perm=[1, 0, 2]),
    ] + lstm_tail("t_")
    else_nodes = [
        helper.make_node("Reshape", ["input", "shape8"], ["e_frames"]),
        helper.make_node("Squeeze", ["e_frames"], ["e_sq"]),
        helper.make_node("Unsqueeze", ["e_sq", "ax1"], ["e_un"]),
        helper.make_node("Slice", ["e_un", "s0", "s16", "axm1"], ["e_cut"]),
        helper.make_node("Mul", ["e_cut", "half"], ["e_seq"]),
    ] + lstm_tail("e_")
    outs = lambda p: [vi(p + "out", T.FLOAT, [1, 1]), vi(p + "stateN", T.FLOAT, [2, 1, HIDDEN])]
    then_g = helper.make_graph(then_nodes, "rate_16k", [], outs("t_"))
    else_g = helper.make_graph(else_nodes, "rate_8k", [], outs("e_"))
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["output", "stateN"], then_branch=then_g,
                         else_branch=else_g, name="If_rate"),
    ]
    s = 1.0 / np.sqrt(HIDDEN)
    inits = [
        const("sr16k", np.int64(16000)),
        const("shape16", np.array([1, 4, 144], np.int64)),
        const("shape8", np.array([1, 4, 72, -1], np.int64)),
        const("flat", np.array([1, HIDDEN], np.int64)),
        const("s0", np.array([0], np.int64)),
        const("s1", np.array([1], np.int64)),
        const("s2", np.array([2], np.int64)),
        const("s16", np.array([FEAT], np.int64)),
        const("ax0", np.array([0], np.int64)),
        const("ax1", np.array([1], np.int64)),
        const("axm1", np.array([-1], np.int64)),
        const("half", np.float32(0.5)),
        const("E", (rng.standard_normal((144, FEAT)) * 0.15).astype(np.float32)),
        const("W", (rng.uniform(-s, s, (1, 4 * HIDDEN, FEAT))).astype(np.float32)),
        const("R", (rng.uniform(-s, s, (1, 4 * HIDDEN, HIDDEN))).astype(np.float32)),
        const("B", (rng.uniform(-s, s, (1, 8 * HIDDEN))).astype(np.float32)),
        const("D", (rng.standard_normal((HIDDEN, 1)) * 0.3).astype(np.float32)),
        const("d", np.array([0.1], np.float32)),
    ]
    graph = helper.make_graph(
        nodes, "vad_if",
        [vi("input", T.FLOAT, [1, "N"]), vi("state", T.FLOAT, [2, 1, HIDDEN]),
         vi("sr", T.INT64, [])],
        [vi("output", T.FLOAT, [1, 1]), vi("stateN", T.FLOAT, [2, 1, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aicf gen_if_branch_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def runner(model):
    """(run(inputs) -> [output, stateN], what computed it)."""
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return (lambda feeds: sess.run(None, feeds)), f"ONNX Runtime {ort.__version__}"
    except ImportError:
        pass
    try:
        from onnx.reference import ReferenceEvaluator
    except ImportError:
        raise SystemExit("needs onnxruntime, or onnx >= 1.13 for onnx.reference")
    ref = ReferenceEvaluator(model)
    return (lambda feeds: ref.run(None, feeds)), f"onnx.reference {onnx.__version__}"


def main():
    rng = np.random.default_rng(51)
    model = build_model(rng)
    run, what = runner(model)
    out_dir = os.path.join(ROOT, NAME)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    state0 = np.zeros((2, 1, HIDDEN), np.float32)
    np.save(os.path.join(out_dir, "state0.npy"), state0)
    for rate, n in [(16000, 576), (8000, 288)]:
        sr = np.array(rate, np.int64)
        np.save(os.path.join(out_dir, f"sr{rate}.npy"), sr)
        # A tone with noise, louder in the middle chunks (speech-like onset and offset).
        t = np.arange(CHUNKS * n) / rate
        gain = np.interp(t, [0, t[-1] / 3, 2 * t[-1] / 3, t[-1]], [0.05, 0.8, 0.8, 0.05])
        audio = gain * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.shape)
        chunks = audio.astype(np.float32).reshape(CHUNKS, 1, n)
        state, outs, states = state0, [], []
        for c in chunks:
            out, state = run({"input": c, "state": state, "sr": sr})
            outs.append(out)
            states.append(state)
        sdir = os.path.join(out_dir, f"stream{rate // 1000}k")
        os.makedirs(sdir)
        np.save(os.path.join(sdir, "input.npy"), chunks)
        np.save(os.path.join(sdir, "output.npy"), np.stack(outs))
        np.save(os.path.join(sdir, "stateN.npy"), np.stack(states))
        # The first chunk as aicf-run's --input files and --reference folder.
        fdir = os.path.join(out_dir, f"first{rate // 1000}k")
        os.makedirs(fdir)
        np.save(os.path.join(fdir, "input.npy"), chunks[0])
        np.save(os.path.join(fdir, "output.npy"), outs[0])
        np.save(os.path.join(fdir, "stateN.npy"), states[0])
        print(f"  {rate} Hz: {CHUNKS} chunks of {n}; outputs "
              f"{' '.join(f'{float(o.ravel()[0]):.3f}' for o in outs)}")
    print(f"{NAME}: written to {out_dir} (references from {what})")


if __name__ == "__main__":
    main()
