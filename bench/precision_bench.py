#!/usr/bin/env python3
"""Reduced precision on the host, side by side at one thread (issue 54): ORT fp32, OpenVINO pinned
to f32, OpenVINO at its default precision (bf16 on CPUs with AMX or AVX512-BF16), aicf fp32 and
aicf `--precision bf16`; with aicf bf16's accuracy against the model's reference outputs (max abs
error, cosine similarity, top-1 agreement for 1000-class logits).

    bench/.venv/bin/python bench/precision_bench.py bench/models/resnet18 testdata/models/bert_layer_op17 ...
        [--build build] [--workdir bench/work/precision] [--rounds 3] [--reps 30]

Each model dir holds model.onnx, inputs/*.npy, outputs/*.npy (and args.txt for aicfc). Engines are
timed in rounds, one after another within a round; each engine's figure is its best round's median
(the machine's noise is one-sided). aicf runs through `aicf-run --bench` (a process per round).
Until `make bench` (bench/run_bench.py) has precision rows, this is how the bf16 rows in
docs/precision.md were measured.
"""
import argparse
import glob
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_ms(fn, reps, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def peers(model, feeds):
    import onnxruntime as ort
    import openvino as ov
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ort_feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}
    engines = {"ORT f32": lambda: sess.run(None, ort_feeds)}
    core = ov.Core()
    default_precision = ""
    for name, pin in (("OV f32", {"INFERENCE_PRECISION_HINT": "f32"}), ("OV default", {})):
        cfg = dict(pin, PERFORMANCE_HINT="LATENCY", NUM_STREAMS="1", INFERENCE_NUM_THREADS="1",
                   ENABLE_CPU_PINNING="NO")
        cm = core.compile_model(core.read_model(model), "CPU", cfg)
        req = cm.create_infer_request()
        ov_feeds = {i.get_any_name(): feeds[i.get_any_name()] for i in cm.inputs}
        engines[name] = lambda req=req, f=ov_feeds: req.infer(f)
        if not pin:
            default_precision = str(cm.get_property("INFERENCE_PRECISION_HINT"))
    return engines, default_precision


def aicf_ms(run, folder, reps):
    out = subprocess.run([run, folder, "--bench", str(reps), "--threads", "1", "--random"],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1].split()[4])


def accuracy(run, folder, model_dir, scratch):
    args = [run, folder, "--output-dir", scratch]
    for f in sorted(glob.glob(os.path.join(model_dir, "inputs", "*.npy"))):
        args += ["--input", f"{os.path.basename(f)[:-4]}={f}"]
    subprocess.run(args, check=True, capture_output=True)
    notes = []
    for f in sorted(glob.glob(os.path.join(model_dir, "outputs", "*.npy"))):
        want = np.load(f).astype(np.float64).ravel()
        got = np.load(os.path.join(scratch, os.path.basename(f))).astype(np.float64).ravel()
        cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) or 1.0))
        note = f"max abs {np.abs(got - want).max():.3g}, cos {cos:.6f}"
        if want.size == 1000:
            note += f", top-1 {'same' if got.argmax() == want.argmax() else 'DIFFERS'}"
        notes.append(note)
    return "; ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "bench", "work", "precision"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    aicfc, run = os.path.join(a.build, "aicfc"), os.path.join(a.build, "aicf-run")
    cols = ["ORT f32", "OV f32", "OV default", "aicf fp32", "aicf bf16"]
    print("| model | " + " | ".join(cols) + " | aicf bf16 / fp32 | aicf bf16 / OV default | "
          "aicf bf16 accuracy |")
    print("|---" * (len(cols) + 4) + "|")
    ratios = []
    for d in a.models:
        name = os.path.basename(os.path.normpath(d))
        model = os.path.join(d, "model.onnx")
        extra = open(os.path.join(d, "args.txt")).read().split() if os.path.exists(
            os.path.join(d, "args.txt")) else []
        folders = {}
        for prec in ("fp32", "bf16"):
            folders[prec] = os.path.join(a.workdir, name, prec)
            subprocess.run([aicfc, model, *extra, "-o", folders[prec], "--precision", prec],
                           check=True, capture_output=True)
        feeds = {os.path.basename(f)[:-4]: np.load(f)
                 for f in glob.glob(os.path.join(d, "inputs", "*.npy"))}
        engines, ov_default = peers(model, feeds)
        engines["aicf fp32"] = lambda: aicf_ms(run, folders["fp32"], a.reps)
        engines["aicf bf16"] = lambda: aicf_ms(run, folders["bf16"], a.reps)
        best = {c: math.inf for c in cols}
        for _ in range(a.rounds):
            for c in cols:
                ms = engines[c]() if c.startswith("aicf") else median_ms(engines[c], a.reps)
                best[c] = min(best[c], ms)
        acc = accuracy(run, folders["bf16"], d, os.path.join(a.workdir, name, "outputs"))
        ratios.append(best["aicf bf16"] / best["OV default"])
        print(f"| {name} | " + " | ".join(f"{best[c]:.2f}" for c in cols) +
              f" | {best['aicf bf16'] / best['aicf fp32']:.2f} | {ratios[-1]:.2f} | {acc} |",
              flush=True)
        if ov_default != "<Type: 'bfloat16'>":
            print(f"  (OV default precision here: {ov_default})", file=sys.stderr)
    print(f"\ngeomean aicf bf16 / OV default {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}"
          " (1 thread, ms, best of rounds of medians)")


if __name__ == "__main__":
    main()
