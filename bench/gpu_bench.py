#!/usr/bin/env python3
"""GPU benchmark for aicf's CUDA path against ONNX Runtime's CUDA execution provider.

Two phases, so the CUDA kernels can be built on a machine with the toolkit but no GPU and run on
one with a GPU:

  gpu_bench.py compile --build build --out DIR     # aicfc --target cuda:sm_90 for every case
  gpu_bench.py run --build build --out DIR         # on the GPU machine: check, then time
  gpu_bench.py check --build build --out DIR       # on the GPU machine: compile every testdata
                                                   # model with reference outputs, check both ways

A case is a testdata model at its bundled shape, a dynamic one bound to a larger shape, or one of
the torchvision networks that `make bench` exports into bench/models (1x3x224x224, PyTorch's
outputs as the reference; skipped where not exported). `run`
makes each case's inputs (the bundled .npy files, or seeded random ones), takes the reference
outputs (PyTorch's bundled ones, else ONNX Runtime's CPU provider), checks aicf's outputs with
and without CUDA Graph replay (`aicf-run --reference`), then times, alternating in rounds:
  aicf host I/O     aicf-run --bench N             (copy in, graph replay, copy out, sync)
  aicf device I/O   aicf-run --bench N --device-io (graph replay on device buffers, sync)
  ORT host I/O      InferenceSession.run on numpy arrays (CUDAExecutionProvider)
  ORT device I/O    run_with_iobinding, inputs and outputs on the device
  ORT graph         the same with enable_cuda_graph=1 (ORT's own CUDA Graph replay)
  ORT fp32          device I/O with use_tf32=0: ORT's CUDA provider otherwise lets cuBLAS and
                    cuDNN round fp32 GEMM/conv inputs to TF32 on tensor cores, and aicf computes
                    in fp32, so this is the like-for-like arithmetic
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
    """aicfc --target cuda:sm_90 for every case, args.jobs compiles at a time."""
    os.makedirs(args.out, exist_ok=True)
    todo = [(name, aicfc_cmd(args, os.path.join(ROOT, folder, "model.onnx"),
                             os.path.join(args.out, name), flags))
            for name, folder, flags, _ in selected(args)]
    for name, (rc, err) in compile_many(args.jobs, todo).items():
        if rc != 0:
            log(f"{name}: {err}")


def check_all(args):
    """Every testdata model that has reference outputs, compiled for the GPU (its args.txt binds
    the dynamic dims) and run with and without CUDA Graph replay against those outputs."""
    folders = sorted(os.path.dirname(os.path.join(dp, "model.onnx"))
                     for dp, _, files in os.walk(os.path.join(ROOT, "testdata"))
                     if "model.onnx" in files and os.path.isdir(os.path.join(dp, "outputs")))
    cases = []
    for src in folders:
        name = os.path.relpath(src, os.path.join(ROOT, "testdata")).replace("/", "_")
        args_txt = os.path.join(src, "args.txt")
        flags = open(args_txt).read().split() if os.path.isfile(args_txt) else []
        cases.append((name, src, os.path.join(args.out, "check", name), flags))
    built = compile_many(args.jobs, [(n, aicfc_cmd(args, os.path.join(src, "model.onnx"), out, f))
                                     for n, src, out, f in cases])
    rows = []
    for name, src, out, _ in cases:
        rc, err = built[name]
        if rc != 0:
            rows.append((name, f"aicfc rc={rc}: {err[-300:]}"))
            continue
        ref = ["--reference", os.path.join(src, "outputs"), "--rtol", "1e-3", "--atol", "1e-3"]
        results = []
        for extra in ([], ["--no-cuda-graph"]):
            rc, o = aicf_run(args, out, src, ref + extra)
            errs = re.findall(r"max abs error ([0-9.e+-]+)", o)
            results.append(("ok" if rc == 0 else f"FAIL rc={rc}") +
                           (f" (max abs err {max(float(e) for e in errs):.2g})" if errs else ""))
            if rc != 0:
                log(f"{name} {' '.join(extra)}: {o[-1500:]}")
        rows.append((name, " / ".join(results)))
        log(f"{name}: {rows[-1][1]}")
    print("| model | graph replay / step by step |")
    print("|---|---|")
    for name, res in rows:
        print(f"| {name} | {res} |")
    failed = [n for n, res in rows if "ok" not in res or "FAIL" in res]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} models match their references")
    return 1 if failed else 0


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


def run_all(args):
    rows = []
    for name, folder, _, shapes in selected(args):
        out = os.path.join(args.out, name)
        io_dir = os.path.join(args.out, name + ".io")
        row = {"case": name}
        rows.append(row)
        if not os.path.isfile(os.path.join(out, "plan.yaml")):
            row["check"] = "not compiled"
            continue
        make_inputs(name, folder, shapes, io_dir)
        ref = ["--reference", os.path.join(io_dir, "outputs"), "--rtol", "1e-3", "--atol", "1e-3"]
        rc1, o1 = aicf_run(args, out, io_dir, ref)
        rc2, o2 = aicf_run(args, out, io_dir, ref + ["--no-cuda-graph"])
        row["check"] = "ok" if rc1 == 0 and rc2 == 0 else "FAIL"
        log(f"{name}: check graph rc={rc1} no-graph rc={rc2}")
        if rc1 or rc2:
            log(o1[-2000:])
            log(o2[-2000:])
        rc, prof = aicf_run(args, out, io_dir, ["--profile", "--bench", "20"])
        with open(os.path.join(args.out, name + ".profile.txt"), "w") as f:
            f.write(prof + "\n")
        try:
            oc = OrtCase(os.path.join(ROOT, folder, "model.onnx"), io_dir)
            row["ort_graph_error"] = oc.graph_error
        except Exception as e:  # noqa: BLE001 - the row says why
            oc = None
            row["ort_error"] = str(e).splitlines()[0][:160]
            log(f"{name}: ORT failed: {row['ort_error']}")
        acc = {k: [] for k in ("aicf_host", "aicf_dev", "ort_host", "ort_dev", "ort_graph",
                                "ort_fp32")}
        for _ in range(args.rounds):
            _, o = aicf_run(args, out, io_dir, ["--bench", str(args.reps)])
            acc["aicf_host"].append(median_of(o, False))
            _, o = aicf_run(args, out, io_dir, ["--bench", str(args.reps), "--device-io"])
            acc["aicf_dev"].append(median_of(o, True))
            if oc:
                acc["ort_host"].append(time_fn(oc.host, args.reps))
                acc["ort_dev"].append(time_fn(oc.device, args.reps))
                acc["ort_fp32"].append(time_fn(oc.fp32, args.reps))
                if oc.gsess:
                    acc["ort_graph"].append(time_fn(oc.graph, args.reps))
        for k, v in acc.items():
            v = [x for x in v if x is not None]
            row[k] = float(np.median(v)) if v else None
        log(f"{name}: {row}")
        del oc
    print_table(rows)


def fmt(x):
    return "-" if x is None else f"{x:.4f}"


def print_table(rows):
    print("| case | aicf check | aicf host I/O ms | ORT host I/O ms | ratio | aicf device I/O ms "
          "| ORT device I/O ms | ORT CUDA graph ms | ratio (vs best ORT device) | ORT fp32 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        h = r.get("aicf_host"), r.get("ort_host")
        best = [x for x in (r.get("ort_dev"), r.get("ort_graph")) if x]
        ratio_h = fmt(h[0] / h[1]) if all(h) else "-"
        ratio_d = fmt(r["aicf_dev"] / min(best)) if best and r.get("aicf_dev") else "-"
        note = r.get("ort_error") or ""
        print(f"| {r['case']} | {r.get('check', '-')} | {fmt(r.get('aicf_host'))} | "
              f"{fmt(r.get('ort_host'))} | {ratio_h} | {fmt(r.get('aicf_dev'))} | "
              f"{fmt(r.get('ort_dev'))} | {fmt(r.get('ort_graph'))} | {ratio_d} | "
              f"{fmt(r.get('ort_fp32'))} |" +
              (f" {note}" if note else ""))
    errs = {r["case"]: r["ort_graph_error"] for r in rows if r.get("ort_graph_error")}
    for k, v in errs.items():
        print(f"\nORT CUDA graph on {k}: {v}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["compile", "run", "check"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", default=TARGET, help="cpu dry-runs this script without a GPU")
    ap.add_argument("--aicfc-arg", action="append",
                    help="an extra aicfc flag for every compile (repeatable): --aicfc-arg=--no-split-k")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiles at a time")
    args = ap.parse_args()
    phases = {"compile": compile_all, "run": run_all, "check": check_all}
    sys.exit(phases[args.phase](args) or 0)


if __name__ == "__main__":
    main()
