#!/usr/bin/env python3
"""int8 QDQ models on the host, side by side at one thread (issue 54): each float model quantized
by ONNX Runtime's static quantizer (QDQ format, per-channel int8 weights, uint8 activations,
calibrated on 8 random inputs), then timed in ONNX Runtime (its int8 kernels), OpenVINO at its
default settings (it runs a QDQ model's convolutions in int8) and aicf, beside ORT and aicf on the
float model; with aicf's agreement with ORT's int8 outputs (largest difference in quanta of the
output, top-1 agreement for 1000-class logits) on the model's stored input.

    bench/.venv/bin/python bench/int8_bench.py bench/models/resnet18 ... [--build build]
        [--workdir bench/work/int8] [--rounds 3] [--reps 30]

Timing as bench/precision_bench.py: rounds, engines one after another within a round, each
engine's best round's median; aicf through `aicf-run --bench` (a process per round).
"""
import argparse
import glob
import math
import os
import subprocess

import numpy as np

from precision_bench import ROOT, aicf_ms, median_ms


def quantize(model, out, feeds):
    """The QDQ model ORT's tools make, cached: pre-processing (shape inference, constant folding)
    then quantize_static."""
    if os.path.exists(out):
        return
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = out[:-5] + ".pre.onnx"
    quant_pre_process(model, pre, skip_symbolic_shape=True)
    rng = np.random.default_rng(0)
    batches = iter([{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in feeds.items()}
                    for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    quantize_static(pre, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)


def ort_session(model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ov_request(model):
    import openvino as ov
    cfg = dict(PERFORMANCE_HINT="LATENCY", NUM_STREAMS="1", INFERENCE_NUM_THREADS="1",
               ENABLE_CPU_PINNING="NO")
    return ov.Core().compile_model(model, "CPU", cfg).create_infer_request()


def agreement(run, folder, feeds, want, scratch):
    """aicf's int8 output against ORT's: the largest difference in quanta (the smallest step
    between ORT's output values), and top-1 for 1000 classes."""
    os.makedirs(scratch, exist_ok=True)
    args = [run, folder, "--output-dir", scratch]
    for k, v in feeds.items():
        f = os.path.join(os.path.dirname(scratch), f"input_{k}.npy")
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    subprocess.run(args, check=True, capture_output=True)
    got = np.load(sorted(glob.glob(os.path.join(scratch, "*.npy")))[0]).astype(np.float64).ravel()
    want = want.astype(np.float64).ravel()
    steps = np.diff(np.unique(want))
    quantum = steps[steps > 0].min() if (steps > 0).any() else 1.0
    note = f"{np.abs(got - want).max() / quantum:.1f} quanta"
    if want.size == 1000:
        note += f", top-1 {'same' if got.argmax() == want.argmax() else 'DIFFERS'}"
    return note


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "bench", "work", "int8"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    aicfc, run = os.path.join(a.build, "aicfc"), os.path.join(a.build, "aicf-run")
    cols = ["ORT f32", "aicf fp32", "ORT int8", "OV int8", "aicf int8"]
    print("| model | " + " | ".join(cols) + " | aicf int8 / ORT int8 | aicf int8 vs ORT int8 |")
    print("|---" * (len(cols) + 3) + "|")
    ratios = []
    for d in a.models:
        name = os.path.basename(os.path.normpath(d))
        work = os.path.join(a.workdir, name)
        os.makedirs(work, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        feeds = {os.path.basename(f)[:-4]: np.load(f)
                 for f in glob.glob(os.path.join(d, "inputs", "*.npy"))}
        qmodel = os.path.join(work, "model_int8.onnx")
        quantize(model, qmodel, feeds)
        folders = {"fp32": os.path.join(work, "fp32"), "int8": os.path.join(work, "int8")}
        for prec, m in (("fp32", model), ("int8", qmodel)):
            subprocess.run([aicfc, m, "-o", folders[prec]], check=True, capture_output=True)
        engines = {}
        for label, m in (("ORT f32", model), ("ORT int8", qmodel)):
            s = ort_session(m)
            engines[label] = lambda s=s: s.run(None, feeds)
        req = ov_request(qmodel)
        engines["OV int8"] = lambda: req.infer(feeds)
        engines["aicf fp32"] = lambda: aicf_ms(run, folders["fp32"], a.reps)
        engines["aicf int8"] = lambda: aicf_ms(run, folders["int8"], a.reps)
        best = {c: math.inf for c in cols}
        for _ in range(a.rounds):
            for c in cols:
                ms = engines[c]() if c.startswith("aicf") else median_ms(engines[c], a.reps)
                best[c] = min(best[c], ms)
        want = ort_session(qmodel).run(None, feeds)[0]
        acc = agreement(run, folders["int8"], feeds, want, os.path.join(work, "outputs"))
        ratios.append(best["aicf int8"] / best["ORT int8"])
        print(f"| {name} | " + " | ".join(f"{best[c]:.2f}" for c in cols) +
              f" | {ratios[-1]:.2f} | {acc} |", flush=True)
    print(f"\ngeomean aicf int8 / ORT int8 {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}"
          " (1 thread, ms, best of rounds of medians)")


if __name__ == "__main__":
    main()
