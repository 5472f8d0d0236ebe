#!/usr/bin/env python3
"""GPU benchmark and checks for aicf's CUDA path (docs/gpu-results.md).

Phases, so the CUDA kernels can be built on a machine with the toolkit but no GPU and run on
one with a GPU (scripts/gpu_session.sh runs them all):

  gpu_bench.py compile --out DIR [--precisions fp32 bf16 ...]   # aicfc --target cuda:sm_90 for
                                                 # every case at each precision: DIR/<p>/<case>
  gpu_bench.py emulate --out DIR --emulated EDIR # no GPU needed: every testdata model's reduced-
                                                 # precision GPU plan run through the host
                                                 # printer (--plan-for), outputs in EDIR/<p>/<model>
  gpu_bench.py check --out DIR [--emulated EDIR] # on the GPU machine: every testdata model with
                                                 # reference outputs, at each precision, with and
                                                 # without CUDA Graph replay, against the fp32
                                                 # reference and the host emulation
  gpu_bench.py run --out DIR [--peer torch|ort|all|none]   # on the GPU machine: check, then time

A case is a testdata model at its bundled shape, a dynamic one bound to a larger shape, or one of
the torchvision networks that `make bench` exports into bench/models (1x3x224x224, PyTorch's
outputs as the reference; skipped where not exported). `run` makes each case's inputs (the
bundled .npy files, or seeded random ones), takes the reference outputs (PyTorch's bundled ones,
else ONNX Runtime's CPU provider), checks each precision's plan with and without CUDA Graph
replay (`aicf-run --reference`: fp32 within 1e-3, reduced precision by cosine similarity), then
times, alternating in rounds, aicf's device I/O (`aicf-run --bench N --device-io`: graph replay
on device buffers plus a synchronisation) at each precision beside the peers:
  torch     bench/gpu_peers.py: the module the case was exported from, captured in a CUDA Graph
            and replayed at each precision, and eager with PyTorch's defaults
  ort       ONNX Runtime's CUDA provider: run_with_iobinding (device I/O), with its own CUDA
            Graph (enable_cuda_graph=1), and with use_tf32=0 (like-for-like fp32 arithmetic)
and prints a markdown table of medians (ms) and ratios. TensorRT is not among the peers: its
PyPI wheels (tensorrt-cu13-libs) are stubs that download the libraries from another host at
install time, which this project's machines cannot reach.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TARGET = "cuda:sm_90"

# (case name, model folder under ROOT, extra aicfc flags binding dynamic dims, ORT-side input
# shapes: None means the folder's bundled inputs/ and outputs/)
CASES = [
    ("mlp_op13", "testdata/models/mlp_op13", [], None),
    ("cnn_op13", "testdata/models/cnn_op13", [], None),
    ("gpt2_block_op17", "testdata/models/gpt2_block_op17", [], None),
    ("bert_layer_op17", "testdata/models/bert_layer_op17", [], None),
    ("vit_block_op17", "testdata/models/vit_block_op17", [], None),
    ("llama_block_op17", "testdata/models/llama_block_op17", [], None),
    ("mlp_b65536", "testdata/models/mlp_dyn_op13", ["--shape", "x=65536x64"], {"x": (65536, 64)}),
    ("gpt2_b64_s128", "testdata/models/gpt2_block_dyn_op17",
     ["--dim", "batch=64", "--dim", "seq=128"], {"x": (64, 128, 128)}),
    ("bert_b64_s128", "testdata/models/bert_layer_dyn_op13",
     ["--dim", "batch=64", "--dim", "seq=128"],
     {"hidden": (64, 128, 128), "attention_mask": (64, 128)}),
] + [(n, "bench/models/" + n, [], None) for n in (
    "resnet18", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x1_0", "squeezenet1_1",
    "efficientnet_b0")]


PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# Unit roundoff of the precision a contraction's operands are rounded to.
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def ref_tol(p):
    """Against the fp32 reference: 1e-3 for fp32 plans, else the bound tests/unit/
    test_precision.cpp holds the emulated plans to (8u, u the operands' unit roundoff)."""
    return 1e-3 if p == "fp32" else 8 * UNIT_ROUNDOFF[p]


def emu_tol(p):
    """Against the host emulation of the same plan: the two differ in the order of the sums
    inside one mma only, and in which staged value that order tips to the other rounding."""
    return 1e-3 if p == "fp32" else 2 * UNIT_ROUNDOFF[p]


def precision_flags(p):
    return [] if p == "fp32" else ["--precision", p]


def log(*a):
    print("[gpu-bench]", *a, file=sys.stderr, flush=True)


def hardware(args):
    return ["--hardware", "h200"] if args.target.startswith("cuda") else []


def selected(args):
    """The cases asked for whose model exists (bench/models is filled by `make bench` only)."""
    for case in CASES:
        if args.only and case[0] not in args.only:
            continue
        if not os.path.isfile(os.path.join(ROOT, case[1], "model.onnx")):
            log(f"{case[0]}: {case[1]}/model.onnx not found, skipped")
            continue
        yield case


def compile_many(jobs, todo):
    """Runs the (name, aicfc command) pairs, `jobs` at a time; returns {name: (rc, stderr)}."""
    done, running, pending = {}, [], list(todo)
    while pending or running:
        while pending and len(running) < jobs:
            name, cmd = pending.pop(0)
            running.append((name, time.time(), subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        name, t0, p = running.pop(0)
        _, err = p.communicate()
        log(f"{name}: aicfc rc={p.returncode} in {time.time() - t0:.1f} s")
        done[name] = (p.returncode, err.strip())
    return done


def aicfc_cmd(args, model, out, flags):
    return ([os.path.join(args.build, "aicfc"), model, "--target", args.target, "-o", out] +
            hardware(args) + flags + (args.aicfc_arg or []))


def compile_all(args):
    """aicfc --target cuda:sm_90 for every case at every precision asked for (OUT/<precision>/
    <case>), args.jobs compiles at a time."""
    os.makedirs(args.out, exist_ok=True)
    todo = [(f"{p}/{name}", aicfc_cmd(args, os.path.join(ROOT, folder, "model.onnx"),
                                      os.path.join(args.out, p, name), flags + precision_flags(p)))
            for p in args.precisions for name, folder, flags, _ in selected(args)]
    for name, (rc, err) in compile_many(args.jobs, todo).items():
        if rc != 0:
            log(f"{name}: {err}")


def check_models(args):
    """(name, source folder, aicfc flags) of every testdata model that has reference outputs
    (its args.txt binds the dynamic dims), and of each one with a ranges.txt also the folder
    compiled for those ranges (NAME_ranged: symbolic dims, run on the bundled inputs)."""
    folders = sorted(os.path.dirname(os.path.join(dp, "model.onnx"))
                     for dp, _, files in os.walk(os.path.join(ROOT, "testdata"))
                     if "model.onnx" in files and os.path.isdir(os.path.join(dp, "outputs")))
    for src in folders:
        name = os.path.relpath(src, os.path.join(ROOT, "testdata")).replace("/", "_")
        if args.only and name not in args.only and name + "_ranged" not in args.only:
            continue
        args_txt = os.path.join(src, "args.txt")
        if not args.only or name in args.only:
            yield name, src, open(args_txt).read().split() if os.path.isfile(args_txt) else []
        ranges_txt = os.path.join(src, "ranges.txt")
        if os.path.isfile(ranges_txt) and (not args.only or name + "_ranged" in args.only):
            yield name + "_ranged", src, open(ranges_txt).read().split()


def max_err(text):
    errs = re.findall(r"max abs error ([0-9.e+-]+)", text)
    return max(float(e) for e in errs) if errs else None


COSINE_MIN = 0.9999  # run: reduced-precision plans' outputs against the fp32 reference


def min_cosine(text):
    cs = re.findall(r"cosine similarity ([0-9.e+-]+)", text)
    return min(float(c) for c in cs) if cs else None


def in_parallel(jobs, fn, items):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(fn, items))


def check_all(args):
    """Every testdata model that has reference outputs, compiled for the GPU at each precision
    and run with and without CUDA Graph replay against its fp32 reference outputs (within
    ref_tol) and, where `--emulated DIR` holds them, the host emulation's outputs of the same
    plan (within emu_tol)."""
    cases = [(p, name, src, os.path.join(args.out, "check", p, name), flags)
             for p in args.precisions for name, src, flags in check_models(args)]
    built = compile_many(args.jobs, [(f"{p}/{n}", aicfc_cmd(args, os.path.join(src, "model.onnx"),
                                                             out, f + precision_flags(p)))
                                     for p, n, src, out, f in cases])

    def run_case(case):
        """(cell text, failed). A reduced-precision plan is judged by its agreement with the host
        emulation of the same plan (what the GPU kernels must compute); its distance from the
        fp32 reference is reported beside (a quantized model's output may move by a quantum)."""
        p, name, src, out, _ = case
        rc, err = built[f"{p}/{name}"]
        if rc != 0:
            return f"aicfc rc={rc}: {err[-300:]}", True
        cells, failed = [], False
        refs = [("ref", os.path.join(src, "outputs"), ref_tol(p))]
        emu = os.path.join(args.emulated or "", p, name)
        if args.emulated and os.path.isdir(emu):
            refs.append(("emulated", emu, emu_tol(p)))
        for label, ref_dir, tol in refs:
            judged = p == "fp32" or label == "emulated"
            for extra in ([], ["--no-cuda-graph"]):
                rc, o = aicf_run(args, out, src, ["--reference", ref_dir, "--rtol", f"{tol:g}",
                                                  "--atol", f"{tol:g}"] + extra)
                e = max_err(o)
                verdict = "ok" if rc == 0 else ("FAIL" if judged else "over")
                cells.append(verdict + (f" {e:.2g}" if e is not None else ""))
                failed = failed or (rc != 0 and judged)
                if rc != 0:
                    log(f"{p}/{name} vs {label} {' '.join(extra)}: {o[-1500:]}")
        log(f"{p}/{name}: {' / '.join(cells)}")
        return " / ".join(cells), failed

    results = in_parallel(args.jobs, run_case, cases)
    rows = [r[0] for r in results]
    print("Each cell: against the fp32 reference (graph replay / step by step), then, where given, "
          "against the host emulation of the same plan; `ok` and the largest absolute error "
          "(`over`: a reduced-precision plan past the 8u bound from fp32, reported, not judged).\n")
    print("Tolerances (|got - want| <= tol + tol |want|): " +
          ", ".join(f"{p} {ref_tol(p):g} / {emu_tol(p):g}" for p in args.precisions) + "\n")
    names = list(dict.fromkeys(c[1] for c in cases))
    print("| model | " + " | ".join(args.precisions) + " |")
    print("|---|" + "---|" * len(args.precisions))
    cell = {(c[0], c[1]): r for c, r in zip(cases, rows)}
    for n in names:
        print(f"| {n} | " + " | ".join(cell[(p, n)] for p in args.precisions) + " |")
    failed = [r for r in results if r[1]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} model plans match their references")
    return 1 if failed else 0


def emulate_all(args):
    """Host emulation of each reduced-precision GPU plan (--target cpu --plan-for TARGET): its
    outputs on the model's bundled inputs, written to EMULATED/<precision>/<model>/ for `check
    --emulated` to compare the GPU's against. Runs where the plan is compiled, no GPU needed."""
    cases = [(p, name, src, os.path.join(args.out, "emulate", p, name), flags)
             for p in args.precisions if p != "fp32" for name, src, flags in check_models(args)]
    built = compile_many(args.jobs, [
        (f"{p}/{n}", [os.path.join(args.build, "aicfc"), os.path.join(src, "model.onnx"), "--target",
                      "cpu", "--plan-for", args.target, "--hardware", "h200", "-o", out] + f +
         precision_flags(p)) for p, n, src, out, f in cases])
    bad = 0
    for p, name, src, out, _ in cases:
        rc, err = built[f"{p}/{name}"]
        if rc == 0:
            dest = os.path.join(args.emulated, p, name)
            os.makedirs(dest, exist_ok=True)
            rc, err = aicf_run(args, out, src, ["--output-dir", dest])
        if rc != 0:
            bad += 1
            log(f"{p}/{name}: {err[-500:]}")
    return 1 if bad else 0


def make_inputs(name, folder, shapes, io_dir):
    """The case's inputs as .npy files in io_dir/inputs, and reference outputs in io_dir/outputs."""
    import onnx
    src = os.path.join(ROOT, folder)
    ins, outs = os.path.join(io_dir, "inputs"), os.path.join(io_dir, "outputs")
    os.makedirs(ins, exist_ok=True)
    os.makedirs(outs, exist_ok=True)
    if shapes is None:
        for d, dst in ((os.path.join(src, "inputs"), ins), (os.path.join(src, "outputs"), outs)):
            for f in os.listdir(d):
                shutil.copy(os.path.join(d, f), os.path.join(dst, f))
        return
    model = onnx.load(os.path.join(src, "model.onnx"))
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        shape = shapes[i.name]
        if i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            a = rng.standard_normal(shape).astype(np.float32)
        else:  # masks: every position attended
            a = np.ones(shape, dtype=onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
        feeds[i.name] = a
        np.save(os.path.join(ins, i.name + ".npy"), a)
    import onnxruntime as ort
    sess = ort.InferenceSession(os.path.join(src, "model.onnx"), providers=["CPUExecutionProvider"])
    for o, v in zip(sess.get_outputs(), sess.run(None, feeds)):
        np.save(os.path.join(outs, o.name + ".npy"), v)


def aicf_run(args, folder, io_dir, extra):
    cmd = [os.path.join(args.build, "aicf-run"), folder]
    for f in sorted(os.listdir(os.path.join(io_dir, "inputs"))):
        cmd += ["--input", f"{f[:-4]}={os.path.join(io_dir, 'inputs', f)}"]
    r = subprocess.run(cmd + extra, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def median_of(out, device):
    key = "bench (device I/O)" if device else "bench:"
    m = re.search(re.escape(key) + r".*median ([0-9.e+-]+) ms", out)
    return float(m.group(1)) if m else None


class OrtCase:
    def __init__(self, model_path, io_dir):
        import onnxruntime as ort
        if hasattr(ort, "preload_dlls"):  # CUDA/cuDNN from the nvidia-* wheels, where installed
            ort.preload_dlls()
        self.ort = ort
        self.path = model_path
        d = os.path.join(io_dir, "inputs")
        self.feeds = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)}
        so = ort.SessionOptions()
        self.sess = ort.InferenceSession(model_path, so, providers=["CUDAExecutionProvider"])
        if "CUDAExecutionProvider" not in self.sess.get_providers():
            raise RuntimeError("CUDAExecutionProvider not available: " + str(self.sess.get_providers()))
        self.binding = self._bind(self.sess)
        self.fsess = ort.InferenceSession(
            model_path, ort.SessionOptions(), providers=[("CUDAExecutionProvider", {"use_tf32": "0"})])
        self.fbinding = self._bind(self.fsess)
        self.gsess, self.gbinding = None, None
        try:
            gso = ort.SessionOptions()
            self.gsess = ort.InferenceSession(
                model_path, gso, providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"})])
            self.gbinding = self._bind(self.gsess)
            self.gsess.run_with_iobinding(self.gbinding)  # captures the graph
        except Exception as e:  # noqa: BLE001 - reported, the other ORT modes still run
            self.graph_error = str(e).splitlines()[0][:160]
            self.gsess = None
        else:
            self.graph_error = None

    def _bind(self, sess):
        b = sess.io_binding()
        self._keep = getattr(self, "_keep", [])
        for k, v in self.feeds.items():
            ov = self.ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0)
            self._keep.append(ov)
            b.bind_ortvalue_input(k, ov)
        for o in sess.get_outputs():
            b.bind_output(o.name, "cuda", 0)
        return b

    def host(self):
        self.sess.run(None, self.feeds)

    def device(self):
        self.sess.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()

    def fp32(self):
        self.fsess.run_with_iobinding(self.fbinding)
        self.fbinding.synchronize_outputs()

    def graph(self):
        self.gsess.run_with_iobinding(self.gbinding)
        self.gbinding.synchronize_outputs()

    def outputs(self):
        return self.sess.run(None, self.feeds)


def time_fn(fn, reps):
    for _ in range(min(reps, 10)):
        fn()
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ms))


def onnx_input_names(path):
    import onnx
    return [i.name for i in onnx.load(path, load_external_data=False).graph.input]


def run_all(args):
    """Per case: each precision's plan checked against the reference, then device I/O medians
    of aicf (graph replay) and the peers, alternating in rounds."""
    rows = []
    for name, folder, _, shapes in selected(args):
        io_dir = os.path.join(args.out, name + ".io")
        row = {"case": name, "check": {}}
        rows.append(row)
        plans = {p: os.path.join(args.out, p, name) for p in args.precisions
                 if os.path.isfile(os.path.join(args.out, p, name, "plan.yaml"))}
        if not plans:
            continue
        make_inputs(name, folder, shapes, io_dir)
        for p, out in plans.items():
            tol = ref_tol(p)
            ref = ["--reference", os.path.join(io_dir, "outputs"), "--rtol", f"{tol:g}", "--atol", f"{tol:g}"]
            rc1, o1 = aicf_run(args, out, io_dir, ref)
            rc2, o2 = aicf_run(args, out, io_dir, ref + ["--no-cuda-graph"])
            e, cos = max_err(o1), min_cosine(o1 + o2)
            # fp32: every element within ref_tol. Reduced precision through a deep network (a
            # CNN's 20-50 rounded products) drifts past the per-element 8u bound on a few logits:
            # there the measure is the outputs' cosine similarity to fp32 (>= COSINE_MIN).
            ok = rc1 == 0 and rc2 == 0 if p == "fp32" else (cos is not None and cos >= COSINE_MIN)
            row["check"][p] = ("ok" if ok else "FAIL") + (f" {e:.2g}" if e is not None else "") + \
                (f" cos {cos:.6f}" if p != "fp32" and cos is not None else "")
            log(f"{name} {p}: check graph rc={rc1} no-graph rc={rc2} max err {e} cosine {cos}")
            if not ok:
                log(o1[-1500:])
            rc, prof = aicf_run(args, out, io_dir, ["--profile", "--bench", "5"])
            with open(os.path.join(args.out, f"{name}.{p}.profile.txt"), "w") as f:
                f.write(prof + "\n")
        model = os.path.join(ROOT, folder, "model.onnx")
        d = os.path.join(io_dir, "inputs")
        feeds = [np.load(os.path.join(d, n + ".npy")) for n in onnx_input_names(model)]
        peers = {}
        if args.peer in ("torch", "all"):
            try:
                import gpu_peers
                tc = gpu_peers.TorchCase(name, feeds, args.precisions)
                peers.update({f"torch_{k}": v for k, v in tc.fns.items()})
                row["torch_errors"] = tc.errors
            except Exception as e:  # noqa: BLE001 - the row says why
                row["torch_error"] = str(e).splitlines()[0][:160]
                log(f"{name}: torch failed: {row['torch_error']}")
        if args.peer in ("ort", "all"):
            try:
                oc = OrtCase(model, io_dir)
                peers.update({"ort_dev": oc.device, "ort_fp32": oc.fp32})
                if oc.gsess:
                    peers["ort_graph"] = oc.graph
            except Exception as e:  # noqa: BLE001 - the row says why
                row["ort_error"] = str(e).splitlines()[0][:160]
                log(f"{name}: ORT failed: {row['ort_error']}")
        acc = {}
        for _ in range(args.rounds):
            for p, out in plans.items():
                _, o = aicf_run(args, out, io_dir, ["--bench", str(args.reps), "--device-io"])
                acc.setdefault(f"aicf_{p}", []).append(median_of(o, True))
            for k, fn in peers.items():
                acc.setdefault(k, []).append(time_fn(fn, args.reps))
        for k, v in acc.items():
            v = [x for x in v if x is not None]
            row[k] = float(np.median(v)) if v else None
        log(f"{name}: {row}")
        peers.clear()
    print_table(args, rows)


def fmt(x):
    return "-" if x is None else f"{x:.4f}"


def print_table(args, rows):
    """One table of device-I/O medians (ms): aicf at each precision beside the peer at the same
    precision, and the ratio."""
    cols = []
    for p in args.precisions:
        cols.append((f"aicf {p}", f"aicf_{p}"))
        if args.peer in ("torch", "all"):
            cols.append((f"torch {p}", f"torch_{p}"))
    extra = []
    if args.peer in ("torch", "all"):
        extra.append(("torch eager", "torch_eager"))
    if args.peer in ("ort", "all"):
        extra += [("ORT", "ort_dev"), ("ORT graph", "ort_graph"), ("ORT fp32", "ort_fp32")]
    head = ["case", "check " + "/".join(args.precisions)] + [c[0] for c in cols]
    if args.peer in ("torch", "all"):
        head += [f"aicf/torch {p}" for p in args.precisions]
    head += [c[0] for c in extra]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["case"], " / ".join(r["check"].get(p, "-") for p in args.precisions)]
        cells += [fmt(r.get(k)) for _, k in cols]
        if args.peer in ("torch", "all"):
            for p in args.precisions:
                a, t = r.get(f"aicf_{p}"), r.get(f"torch_{p}")
                cells.append(fmt(a / t) if a and t else "-")
        cells += [fmt(r.get(k)) for _, k in extra]
        note = "; ".join(x for x in (r.get("torch_error"), r.get("ort_error")) if x)
        print("| " + " | ".join(cells) + " |" + (f" {note}" if note else ""))
    for r in rows:
        for mode, err in (r.get("torch_errors") or {}).items():
            print(f"\ntorch {mode} on {r['case']}: {err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["compile", "run", "check", "emulate"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", default=TARGET, help="cpu dry-runs this script without a GPU")
    ap.add_argument("--aicfc-arg", action="append",
                    help="an extra aicfc flag for every compile (repeatable): --aicfc-arg=--no-split-k")
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=PRECISIONS,
                    help="plans to build and run: --precision of each (fp32 is the default plan)")
    ap.add_argument("--emulated", help="emulate: where to write the host emulation's outputs; "
                    "check: where to read them (DIR/<precision>/<model>/)")
    ap.add_argument("--peer", choices=["torch", "ort", "all", "none"], default="all",
                    help="run: the peers timed beside aicf (ort needs onnxruntime-gpu)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiles at a time")
    args = ap.parse_args()
    if args.phase == "emulate" and not args.emulated:
        ap.error("emulate needs --emulated DIR")
    phases = {"compile": compile_all, "run": run_all, "check": check_all, "emulate": emulate_all}
    sys.exit(phases[args.phase](args) or 0)


if __name__ == "__main__":
    main()
