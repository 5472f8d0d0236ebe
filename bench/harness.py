"""What every bench script shares (bench/run_bench.py and its precision rows,
bench/precision_rows.py): the machine's description, a model folder's inputs and arguments, aicf
through the runtime's C API (build/libaicf_runtime.so via ctypes, so that aicf runs in the same
process as its peers), the output check, and the interleaved timing."""
import ctypes
import glob
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np

from peers import graph_inputs

RTOL, ATOL = 1e-3, 1e-4


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)


def short(msg, n=140):
    msg = " ".join(str(msg).split())
    msg = msg.replace("|", "/")
    return msg if len(msg) <= n else msg[: n - 3] + "..."


# ---------------------------------------------------------------- machine ----------------

def machine_info():
    info = {"cores": os.cpu_count() or 1, "model": platform.processor() or "?", "ghz": None}
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        m = re.search(r"^model name\s*:\s*(.*)$", txt, re.M)
        if m:
            info["model"] = m.group(1).strip()
        m = re.search(r"^flags\s*:\s*(.*)$", txt, re.M)
        flags = m.group(1).split() if m else []
        mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", txt, re.M)]
        src = None
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
            mm = re.search(r"CPU max MHz:\s*([\d.]+)", out)
            if mm:
                info["ghz"], src = float(mm.group(1)) / 1000, "lscpu CPU max MHz"
        except OSError:
            pass
        if info["ghz"] is None:
            mm = re.search(r"@\s*([\d.]+)\s*GHz", info["model"])
            if mm:
                info["ghz"], src = float(mm.group(1)), "model name"
        if info["ghz"] is None and mhz:
            info["ghz"], src = max(mhz) / 1000, "cpu MHz"
        info["ghz_source"] = src
    except OSError:
        pass
    if info["ghz"] is None:
        info["ghz"], info["ghz_source"] = 2.6, "assumed"
    if "avx512f" in flags:
        info["isa"], info["flops_per_cycle"] = "AVX-512 (2 FMA units)", 64
    elif "avx2" in flags and "fma" in flags:
        info["isa"], info["flops_per_cycle"] = "AVX2+FMA (2 FMA units)", 32
    else:
        info["isa"], info["flops_per_cycle"] = "SSE", 8
    info["peak_gflops_per_core"] = info["flops_per_cycle"] * info["ghz"]
    info["peak_gflops"] = info["peak_gflops_per_core"] * info["cores"]
    return info


# ---------------------------------------------------------------- models -----------------

def model_args(mdir):
    p = os.path.join(mdir, "args.txt")
    return open(p).read().split() if os.path.exists(p) else []


def load_npys(d):
    return {os.path.splitext(os.path.basename(f))[0]: np.load(f)
            for f in sorted(glob.glob(os.path.join(d, "*.npy")))}




def static_copy(model, inputs, path):
    """The model with every graph input's shape set to the concrete input's, shapes inferred."""
    import onnx  # (here: a worker that only runs aicf need not load onnx)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for gi in graph_inputs(m):
        shp = inputs[gi.name].shape
        dims = gi.type.tensor_type.shape.dim
        del dims[:]
        for s in shp:
            dims.add().dim_value = int(s)
    del m.graph.value_info[:]
    for o in m.graph.output:  # let inference fill in the now-static output shapes
        for d in o.type.tensor_type.shape.dim:
            if d.dim_param:
                d.Clear()
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    onnx.save(m, path)
    return m


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8), ("bytes", ctypes.c_size_t)]


AICF_NP = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
           "i8": np.int8, "bool": np.bool_}


class AicfLib:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.aicf_open.restype = ctypes.c_void_p
        lib.aicf_open.argtypes = [ctypes.c_char_p]
        lib.aicf_close.argtypes = [ctypes.c_void_p]
        lib.aicf_last_error.restype = ctypes.c_char_p
        for f in ("aicf_num_inputs", "aicf_num_outputs"):
            getattr(lib, f).argtypes = [ctypes.c_void_p]
        for f in ("aicf_input_info", "aicf_output_info"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(TensorInfo)]
        lib.aicf_set_num_threads.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.aicf_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_void_p)]
        self.lib = lib


class AicfEngine:
    def __init__(self, alib, outdir, inputs):
        self.l = alib.lib
        self.m = self.l.aicf_open(outdir.encode())
        if not self.m:
            raise RuntimeError("aicf_open: " + self.l.aicf_last_error().decode())
        self.inputs, self.outputs, self.out_names = [], [], []
        for i in range(self.l.aicf_num_inputs(self.m)):
            ti = TensorInfo()
            self.l.aicf_input_info(self.m, i, ctypes.byref(ti))
            a = np.ascontiguousarray(inputs[ti.name.decode()], dtype=AICF_NP[ti.dtype.decode()])
            if a.nbytes != ti.bytes:
                raise RuntimeError(f"input {ti.name.decode()}: {a.nbytes} B given, plan wants {ti.bytes}")
            self.inputs.append(a)
        for i in range(self.l.aicf_num_outputs(self.m)):
            ti = TensorInfo()
            self.l.aicf_output_info(self.m, i, ctypes.byref(ti))
            self.outputs.append(np.empty(list(ti.shape[: ti.rank]), dtype=AICF_NP[ti.dtype.decode()]))
            self.out_names.append(ti.name.decode())
        self.ip = (ctypes.c_void_p * len(self.inputs))(*[a.ctypes.data for a in self.inputs])
        self.op = (ctypes.c_void_p * len(self.outputs))(*[a.ctypes.data for a in self.outputs])

    def set_threads(self, t):
        self.l.aicf_set_num_threads(self.m, t)

    def run(self):
        if self.l.aicf_run(self.m, self.ip, self.op) != 0:
            raise RuntimeError("aicf_run: " + self.l.aicf_last_error().decode())

    def results(self):
        return dict(zip(self.out_names, [o.copy() for o in self.outputs]))


def check_outputs(res, ref):
    worst = 0.0
    for name, r in ref.items():
        if name not in res:
            return False, f"output {name} missing"
        o = np.asarray(res[name])
        if o.shape != r.shape:
            return False, f"{name} shape {o.shape} != {r.shape}"
        err = np.abs(o.astype(np.float64) - r.astype(np.float64))
        tol = ATOL + RTOL * np.abs(r.astype(np.float64))
        if not np.all(err <= tol):
            return False, f"{name} max|err| {err.max():.2e}"
        worst = max(worst, float(err.max()) if err.size else 0.0)
    return True, f"{worst:.1e}"


class BusyLoad:
    """`n` competing processes, each a spin loop on one core's worth of CPU (issue 19: deployment
    machines are shared), started on entry and killed on exit."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
        time.sleep(0.2)  # let the scheduler see them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        # The scheduler's load tracking decays over tens of milliseconds: an idle timing started
        # at once still sees busy CPUs (wake-ups placed as if loaded; p90 up to 1.7x the median).
        time.sleep(0.5)


def time_interleaved(engines, warmup, reps, min_seconds=0.0):
    """engines: {key: engine}; round-robin, rotating the order each round, for at least `reps`
    rounds and at least `min_seconds` (a model of a few microseconds gets thousands of rounds:
    a few dozen would time one scheduler slice, and under load whether a busy process happened to
    run in it). Per engine: (median, p90, mean) in ms."""
    keys = list(engines)
    for k in keys:
        for _ in range(warmup):
            engines[k].run()
    ts = {k: [] for k in keys}
    start = time.perf_counter()
    r = 0
    while r < reps or (time.perf_counter() - start < min_seconds and r < 200000):
        order = keys[r % len(keys):] + keys[: r % len(keys)]
        for k in order:
            t0 = time.perf_counter()
            engines[k].run()
            ts[k].append(time.perf_counter() - t0)
        r += 1
    return {k: (float(np.median(v)) * 1e3, float(np.percentile(v, 90)) * 1e3, float(np.mean(v)) * 1e3)
            for k, v in ts.items()}
