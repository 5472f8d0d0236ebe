"""The reduced-precision rows of `make bench` (issue 54), at one thread, every engine of a model
timed interleaved in this one process like the fp32 rows (bench/run_bench.py):

- bf16: ORT f32 (ONNX Runtime has no bf16 CPU path), OpenVINO pinned to f32, OpenVINO at its
  default precision (what a user gets: bf16 on CPUs with AMX or AVX512-BF16), OpenVINO pinned to
  bf16 where its default is not bf16, aicf fp32 and aicf `--precision bf16`; aicf bf16's accuracy
  against the model's fp32 reference outputs (max abs error, cosine similarity, top-1 for
  1000-class logits), checked against BF16_BUDGET.
- int8: the model quantized by ONNX Runtime's static quantizer (QDQ format, per-channel int8
  weights, uint8 activations, calibrated on 8 random inputs; cached in the work folder), run by
  ONNX Runtime (its int8 kernels), OpenVINO at its defaults (it runs a QDQ model's convolutions
  in int8) and aicf (the QDQ model as it is: no flag); aicf's agreement with ORT's int8 outputs
  in quanta of the output, and with ONNX's definition of the QDQ graph (ORT with no graph
  optimisation: each op alone, the float ops between the quantize / dequantize pairs), checked
  against INT8_BUDGET_QUANTA. ORT's fused int8 kernels requantize their own way and may
  themselves differ from the definition (by 2 quanta on the LLaMA and ViT blocks): the note
  gives that too.

A step that fails (a quantizer that cannot handle a model, a precision the CPU lacks) is a cell
with its reason, never a dropped row.
"""
import os
import shutil
import subprocess

import numpy as np
import onnx

from harness import AicfEngine, load_npys, log, model_args, short, static_copy, time_interleaved
from peers import OrtEngine, OvEngine

BF16_BUDGET = 0.9999  # cosine similarity with the fp32 reference, per output; and top-1 unchanged
INT8_BUDGET_QUANTA = 1.0  # largest difference from ONNX's definition, in quanta of the output

BF16_COLS = ["ORT f32", "OV f32", "OV default", "OV bf16", "aicf fp32", "aicf bf16"]
INT8_COLS = ["ORT int8", "OV int8", "aicf int8"]


def quantize(model, out, feeds):
    """The QDQ model ONNX Runtime's tools make, cached: pre-processing (shape inference, constant
    folding) then quantize_static."""
    if os.path.exists(out):
        return
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = out[:-5] + ".pre.onnx"
    quant_pre_process(model, pre, skip_symbolic_shape=True)
    rng = np.random.default_rng(0)
    batches = iter([{k: (rng.standard_normal(v.shape).astype(np.float32)
                         if v.dtype == np.float32 else v) for k, v in feeds.items()}
                    for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    tmp = out + ".tmp"
    quantize_static(pre, tmp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)
    os.replace(tmp, out)


def compile_folder(build, model, out, args):
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([os.path.join(build, "aicfc"), model, "-o", out, "--target", "cpu"] + args,
                       capture_output=True, text=True)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        raise RuntimeError(f"aicfc exit {p.returncode}: {lines[-1] if lines else ''}")
    return out


def is_logits(a):
    return a.ndim >= 1 and a.shape[-1] == 1000 and a.size == 1000


def bf16_accuracy(got, ref):
    """(note, within budget) of aicf bf16's outputs against the fp32 reference outputs."""
    notes, ok = [], True
    for name, want in ref.items():
        g = np.asarray(got[name], np.float64).ravel()
        w = np.asarray(want, np.float64).ravel()
        norm = np.linalg.norm(g) * np.linalg.norm(w)
        cos = float(g @ w / norm) if norm else float(np.array_equal(g, w))
        note = f"max abs {np.abs(g - w).max():.3g}, cos {cos:.6f}"
        ok = ok and cos >= BF16_BUDGET
        if is_logits(want):
            same = g.argmax() == w.argmax()
            note += f", top-1 {'same' if same else 'DIFFERS'}"
            ok = ok and same
        notes.append(note if len(ref) == 1 else f"{name}: {note}")
    return "; ".join(notes), ok


def int8_agreement(got, want, definition=None):
    """(note, within budget) of aicf's int8 outputs against ORT's int8 kernels (`want`) and
    against ONNX's definition (`definition`: ORT op by op; None when it did not run): the largest
    differences in quanta (the smallest step between ORT's output values), ORT's own distance
    from the definition where it is not 0, and top-1 for 1000 classes. The budget is judged
    against the definition when there is one, else against ORT's int8 kernels."""
    notes, ok = [], True
    for name, w in want.items():
        g = np.asarray(got[name], np.float64).ravel()
        w = np.asarray(w, np.float64).ravel()
        steps = np.diff(np.unique(w))
        quantum = steps[steps > 0].min() if (steps > 0).any() else 1.0
        q = float(np.abs(g - w).max() / quantum) if w.size else 0.0
        note = f"{q:.1f} quanta"
        judged = q
        if definition is not None and name in definition:
            d = np.asarray(definition[name], np.float64).ravel()
            qd = float(np.abs(g - d).max() / quantum) if d.size else 0.0
            qo = float(np.abs(w - d).max() / quantum) if d.size else 0.0
            note += f" ({qd:.1f} of ONNX's op-by-op definition"
            note += f"; ORT int8 {qo:.1f} from it)" if qo > 0 else ")"
            judged = qd
        ok = ok and judged <= INT8_BUDGET_QUANTA * (1 + 1e-3)  # (f32 rounding of the difference)
        if w.size == 1000:
            same = g.argmax() == w.argmax()
            note += f", top-1 {'same' if same else 'DIFFERS'}"
        notes.append(note if len(want) == 1 else f"{name}: {note}")
    return "; ".join(notes), ok


class Attempt:
    """Collects a model's engines; a builder that raises becomes that column's reason."""

    def __init__(self, row):
        self.row, self.engines = row, {}

    def add(self, key, build):
        try:
            self.engines[key] = build()
            return self.engines[key]
        except Exception as e:  # noqa: BLE001
            self.row["err"][key] = short(f"{type(e).__name__}: {e}", 90)
            return None


def bench_precision(a, names, where, alib, precisions):
    """One row per model: the bf16 and / or int8 engines timed together at one thread."""
    rows = []
    for name in names:
        mdir = where[name]
        wd = os.path.join(a.workdir, name, "precision")
        os.makedirs(wd, exist_ok=True)
        model = os.path.join(mdir, "model.onnx")
        inputs = load_npys(os.path.join(mdir, "inputs"))
        ref = load_npys(os.path.join(mdir, "outputs"))
        args = model_args(mdir) + a.aicfc_args.split()
        row = {"model": name, "lat": {}, "err": {}, "acc": {}}
        rows.append(row)
        log(f"{name}: precision rows ({', '.join(precisions)})")
        at = Attempt(row)
        aicf = lambda out, m=model, extra=(): AicfEngine(  # noqa: E731
            alib, compile_folder(a.build, m, os.path.join(wd, out), args + list(extra)), inputs)
        at.add("ORT f32", lambda: OrtEngine(model, inputs, 1))
        at.add("aicf fp32", lambda: aicf("fp32"))
        if "bf16" in precisions:
            static = os.path.join(wd, "static.onnx")
            static_copy(onnx.load(model), inputs, static)
            at.add("OV f32", lambda: OvEngine(static, inputs, 1))
            ov_default = at.add("OV default", lambda: OvEngine(static, inputs, 1, None))
            row["ov_default"] = ov_default.precision if ov_default else "?"
            if row["ov_default"] == "bf16":
                row["err"]["OV bf16"] = "= OV default"
            else:
                at.add("OV bf16", lambda: OvEngine(static, inputs, 1, "bf16"))
            at.add("aicf bf16", lambda: aicf("bf16", extra=("--precision", "bf16")))
        if "int8" in precisions:
            qmodel = os.path.join(wd, "model_int8.onnx")
            try:
                quantize(model, qmodel, inputs)
                at.add("ORT int8", lambda: OrtEngine(qmodel, inputs, 1))
                try:  # ONNX's definition, for the agreement only (not timed)
                    defn = OrtEngine(qmodel, inputs, 1, optimize=False)
                    defn.run()
                    row["int8_definition"] = defn.results()
                except Exception as e:  # noqa: BLE001
                    log(f"{name}: ORT without graph optimisation failed: {short(e, 80)}")
                at.add("OV int8", lambda: OvEngine(qmodel, inputs, 1, None))
                at.add("aicf int8", lambda: aicf("int8", m=qmodel))
            except Exception as e:  # noqa: BLE001
                for k in INT8_COLS:
                    row["err"][k] = "quantizer: " + short(e, 80)
        engines = at.engines
        for k, e in list(engines.items()):  # outputs first, on the same inputs
            try:
                e.set_threads(1)
                e.run()
            except Exception as ex:  # noqa: BLE001
                row["err"][k] = "run failed: " + short(ex, 80)
                del engines[k]
        if "aicf bf16" in engines:
            row["acc"]["bf16"] = bf16_accuracy(engines["aicf bf16"].results(), ref)
        if "aicf int8" in engines and "ORT int8" in engines:
            row["acc"]["int8"] = int8_agreement(engines["aicf int8"].results(),
                                                engines["ORT int8"].results(),
                                                row.get("int8_definition"))
        log(f"{name}: timing {len(engines)} engines, 1 thread")
        row["lat"] = time_interleaved(engines, a.warmup, a.reps, a.min_seconds)
    return rows


def geomean(xs):
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def render_precision(rows, precisions, a):
    L = ["## Reduced precision at one thread (issue 54)\n"]
    L.append("Every engine of a model timed interleaved in this process at 1 thread, "
             f"{a.reps}+ rounds (median ms), on the model's stored inputs. aicf fp32 is the default "
             "compile, aicf bf16 `--precision bf16` (bf16 products on AVX512-BF16 `vdpbf16ps`; "
             "activations f32 between steps), aicf int8 the QDQ model as it is (convs on "
             "AVX512-VNNI `vpdpbusd` where the CPU has it). int8 models: ONNX Runtime's "
             "`quantize_static` (QDQ, per-channel int8 weights, uint8 activations, 8 random "
             "calibration inputs). Budgets: bf16 cosine similarity >= "
             f"{BF16_BUDGET} with the fp32 reference and top-1 unchanged; int8 within "
             f"{INT8_BUDGET_QUANTA:g} quantum of ONNX's definition of the QDQ graph (ORT with no "
             "graph optimisation, each op alone; ORT's fused int8 kernels are compared too). A "
             "cell that is not a time gives the reason.\n")

    def cell(r, k):
        v = r["lat"].get(k)
        return f"{v[0]:.3f}" if v else r["err"].get(k, "–")

    def ratio(r, x, y, out):
        vx, vy = r["lat"].get(x), r["lat"].get(y)
        if vx and vy:
            out.append(vx[0] / vy[0])
            return f"{vx[0] / vy[0]:.2f}"
        return "–"

    def verdict(acc):
        if not acc:
            return "–"
        return acc[0] + ("" if acc[1] else " **over budget**")

    if "bf16" in precisions:
        defaults = sorted({r["ov_default"] for r in rows if r.get("ov_default", "?") != "?"})
        L.append(f"### bf16 (OpenVINO's default precision here: {', '.join(defaults)})\n")
        hdr = ["model"] + BF16_COLS + ["aicf bf16 / fp32", "aicf bf16 / OV default",
                                       "aicf bf16 / OV bf16", "aicf bf16 vs fp32 reference"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        g_self, g_def, g_bf = [], [], []
        for r in rows:
            ovb = "OV default" if r.get("ov_default") == "bf16" else "OV bf16"
            L.append("| " + " | ".join([r["model"]] + [cell(r, k) for k in BF16_COLS] + [
                ratio(r, "aicf bf16", "aicf fp32", g_self), ratio(r, "aicf bf16", "OV default", g_def),
                ratio(r, "aicf bf16", ovb, g_bf), verdict(r["acc"].get("bf16"))]) + " |")
        L.append(f"\nGeomean: aicf bf16 / aicf fp32 {geomean(g_self):.2f}, aicf bf16 / OV default "
                 f"{geomean(g_def):.2f}, aicf bf16 / OV bf16 {geomean(g_bf):.2f} "
                 f"({len(g_def)} models).\n")
    if "int8" in precisions:
        L.append("### int8 (QDQ models from ONNX Runtime's static quantizer)\n")
        hdr = ["model", "ORT f32", "aicf fp32"] + INT8_COLS + [
            "aicf int8 / ORT int8", "aicf int8 / OV int8",
            "aicf int8 vs ORT int8 (and ONNX's definition)"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        g_ort, g_ov = [], []
        for r in rows:
            L.append("| " + " | ".join([r["model"]] + [cell(r, k) for k in
                                                       ["ORT f32", "aicf fp32"] + INT8_COLS] + [
                ratio(r, "aicf int8", "ORT int8", g_ort), ratio(r, "aicf int8", "OV int8", g_ov),
                verdict(r["acc"].get("int8"))]) + " |")
        L.append(f"\nGeomean: aicf int8 / ORT int8 {geomean(g_ort):.2f} ({len(g_ort)} models), "
                 f"aicf int8 / OV int8 {geomean(g_ov):.2f} ({len(g_ov)} models).\n")
    return L
