"""The peer engines `make bench` times beside aicf (bench/run_bench.py): ONNX Runtime, OpenVINO
pinned to f32, Apache TVM (Relax, no tuning) and IREE (llvm-cpu). Each engine takes its inputs once
and offers run() / results() / set_threads(), so the harness interleaves them in one process."""
import os
import re
import subprocess
import time

import numpy as np


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


# ---------------------------------------------------------------- peers ------------------

class OrtEngine:
    # optimize=False: no graph optimisation, each op run alone as ONNX defines it (a QDQ model's
    # float ops between its quantize / dequantize pairs, not ORT's fused int8 kernels).
    def __init__(self, model_path, inputs, threads, optimize=True):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else
                                       ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        so.log_severity_level = 3
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.s = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        self.feeds = {i.name: inputs[i.name] for i in self.s.get_inputs()}
        self.names = [o.name for o in self.s.get_outputs()]

    def set_threads(self, t):
        pass  # one session per thread count (intra_op_num_threads is fixed at creation)

    def run(self):
        self.last = self.s.run(None, self.feeds)

    def results(self):
        return dict(zip(self.names, self.last))


class OvEngine:
    """OpenVINO's CPU plugin pinned to f32 arithmetic (its default picks bf16 on CPUs with AMX or
    AVX512-BF16: an equal-precision row needs the pin), latency hint, one stream, T threads.
    `precision`: the inference precision hint ("f32", "bf16"), or None for OpenVINO's default
    (`self.precision` then says what it chose)."""

    def __init__(self, model_path, inputs, threads, precision="f32"):
        import openvino as ov
        core = ov.Core()
        cfg = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
               "INFERENCE_NUM_THREADS": str(threads), "ENABLE_CPU_PINNING": "NO"}
        if precision:
            cfg["INFERENCE_PRECISION_HINT"] = precision
        self.cm = core.compile_model(core.read_model(model_path), "CPU", cfg)
        chosen = str(self.cm.get_property("INFERENCE_PRECISION_HINT"))
        self.precision = {"<Type: 'bfloat16'>": "bf16", "<Type: 'float32'>": "f32",
                          "<Type: 'float16'>": "f16"}.get(chosen, chosen)
        self.req = self.cm.create_infer_request()
        self.feeds = {i.get_any_name(): np.ascontiguousarray(inputs[i.get_any_name()]) for i in self.cm.inputs}
        self.names = [o.get_any_name() for o in self.cm.outputs]

    def set_threads(self, t):
        pass  # one compiled model per thread count

    def run(self):
        self.req.infer(self.feeds, share_inputs=True)

    def results(self):
        return {n: self.req.get_output_tensor(i).data.copy() for i, n in enumerate(self.names)}


def compile_tvm(static_model):
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    t0 = time.perf_counter()
    mod = from_onnx(static_model, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    ex = tvm.compile(mod, target=tvm_target())
    return ex, time.perf_counter() - t0


def tvm_target():
    """`llvm` for the host CPU (mcpu as LLVM detects it, so AVX-512 is used where present)."""
    import tvm
    try:
        return tvm.target.Target({"kind": "llvm", "mcpu": tvm.get_global_func("target.llvm_get_system_cpu")()})
    except Exception:  # noqa: BLE001
        return tvm.target.Target("llvm")


class TvmEngine:
    def __init__(self, ex, static_model, inputs):
        import tvm
        from tvm import relax
        self.tvm = tvm
        self.vm = relax.VirtualMachine(ex, tvm.cpu())
        self.f = self.vm["main"]
        mk = tvm.runtime.tensor if hasattr(tvm.runtime, "tensor") else tvm.nd.array
        self.args = [mk(np.ascontiguousarray(inputs[i.name])) for i in graph_inputs(static_model)]
        self.names = [o.name for o in static_model.graph.output]
        self.cfg = tvm.get_global_func("runtime.config_threadpool")

    def set_threads(self, t):
        self.cfg(1, t)  # affinity mode 1 (big cores), t threads

    def run(self):
        self.last = self.f(*self.args)

    def results(self):
        r = self.last
        outs = [r] if hasattr(r, "numpy") else list(r)
        return dict(zip(self.names, [o.numpy() for o in outs]))


def compile_iree(venv_bin, static_path, workdir):
    mlir = os.path.join(workdir, "iree.mlir")
    vmfb = os.path.join(workdir, "iree.vmfb")
    t0 = time.perf_counter()
    for cmd in ([os.path.join(venv_bin, "iree-import-onnx"), static_path, "-o", mlir],
                [os.path.join(venv_bin, "iree-compile"), mlir, "--iree-hal-target-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=host", "-o", vmfb]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            err = [l for l in p.stderr.splitlines() if "error" in l.lower()] or p.stderr.splitlines()
            msg = err[0] if err else f"exit {p.returncode}"
            op = re.search(r'failed to legalize operation .*?name = "([\w.]+)"', msg)
            msg = f"cannot lower {op.group(1)}" if op else re.sub(r"^.*?error: ", "", msg)
            raise RuntimeError(f"{os.path.basename(cmd[0])}: {msg}")
    fn = re.search(r"func\.func @([\w$.]+)\(", open(mlir).read(200000)).group(1)
    return vmfb, fn, time.perf_counter() - t0


class IreeEngine:
    def __init__(self, vmfb, fn, static_model, inputs, threads):
        import iree.runtime as rt
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
        dev = rt.get_driver("local-task").create_default_device()
        self.ctx = rt.SystemContext(config=rt.Config(device=dev))
        self.ctx.add_vm_module(rt.VmModule.mmap(self.ctx.instance, vmfb))
        self.f = self.ctx.modules.module[fn]
        self.args = [np.ascontiguousarray(inputs[i.name]) for i in graph_inputs(static_model)]
        self.names = [o.name for o in static_model.graph.output]

    def set_threads(self, t):
        pass  # one device per thread count

    def run(self):
        r = self.f(*self.args)
        outs = r if isinstance(r, (list, tuple)) else [r]
        self.last = [o.to_host() for o in outs]

    def results(self):
        return dict(zip(self.names, [np.asarray(o) for o in self.last]))
