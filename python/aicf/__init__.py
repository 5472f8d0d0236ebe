"""aicf from Python: compile ONNX models ahead of time and run the compiled folders.

    import aicf, numpy as np
    aicf.compile("model.onnx", "out", dims={"batch": (1, 64, 8)}, explain=True)
    m = aicf.load("out", threads=2)
    y = m.run({"x": np.zeros((8, 64), np.float32)})        # {"logits": ndarray}

`compile` runs the aicfc that ships in this package (or $AICF_AICFC); `load` opens a folder with
the runtime library (C API, runtime/aicf_runtime.h) through the `_runtime` binding. `Model.run`
releases the GIL while the model runs; inputs that are C-contiguous arrays of the input's dtype
are read in place and outputs are written straight into the returned arrays. One model runs one
call at a time (calls from several threads wait for each other); load a folder once per thread
to run in parallel. The compiler's explanations come back as Python objects: `explain(folder)`
(the rewrites with their certificates, and the plan's steps with predicted bytes and times).
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _runtime
from ._runtime import Error

__all__ = ["compile", "load", "explain", "Model", "TensorInfo", "Compiled", "Error",
           "CompileError", "aicfc_path"]
__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


class CompileError(Error):
    """aicfc refused the model or the flags. `returncode` is its exit status (1: bad flags or
    files, 2: a model aicf cannot compile; docs/safety.md, "Exit codes"), `message` its error line."""

    def __init__(self, message: str, returncode: int, stderr: str):
        super().__init__(message)
        self.message, self.returncode, self.stderr = message, returncode, stderr


def aicfc_path() -> str:
    """The aicfc this package runs: $AICF_AICFC, else the one installed with the package."""
    return os.environ.get("AICF_AICFC") or os.path.join(_HERE, "bin", "aicfc")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str          # aicf's name: "f32", "i64", "bf16" (numpy uint16 bits), ...
    shape: Tuple[int, ...]
    bytes: int

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(_NUMPY[self.dtype])


_NUMPY = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "uint16",
          "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64",
          "u32": "uint32", "u16": "uint16", "u8": "uint8", "bool": "bool"}


def _dim_flag(name: str, value: Any) -> str:
    """{"batch": 8} -> batch=8; (1, 64) -> batch=1..64; (1, 64, 8) -> batch=1..64@8."""
    if isinstance(value, str):
        return f"{name}={value}"
    if isinstance(value, int):
        return f"{name}={value}"
    v = tuple(int(x) for x in value)
    if len(v) == 2:
        return f"{name}={v[0]}..{v[1]}"
    if len(v) == 3:
        return f"{name}={v[0]}..{v[1]}@{v[2]}"
    raise ValueError(f"dim {name}: give a value, (min, max) or (min, max, opt), not {value!r}")


@dataclass
class Compiled:
    """What `compile` wrote: the folder, and its plan (plan.yaml) as Python objects."""
    folder: str
    command: List[str]

    @property
    def plan(self) -> Dict[str, Any]:
        return _runtime.read_yaml(os.path.join(self.folder, "plan.yaml"))

    def explain(self) -> "Explanation":
        return explain(self.folder)


def compile(model: Union[str, os.PathLike, bytes, Any], out: Union[str, os.PathLike], *,
            target: str = "cpu", dims: Optional[Mapping[str, Any]] = None,
            shapes: Optional[Mapping[str, Sequence[int]]] = None,
            consts: Optional[Mapping[str, Any]] = None, precision: Optional[str] = None,
            plan_for: Optional[str] = None, explain: bool = False, bundle: bool = False,
            extra_args: Iterable[str] = ()) -> Compiled:
    """Compiles `model` (a path, the serialized bytes, or an onnx.ModelProto) into folder `out`
    with aicfc. `dims` binds or ranges symbolic dims ({"batch": 8}, {"batch": (1, 64, 8)});
    `shapes` binds input shapes ({"x": (8, 64)}); `consts` binds inputs to values at compile
    time ({"sr": 16000} or {"w": "w.npy"}); `target` is "cpu" or "cuda:sm_XX"; `precision` is
    fp32 / tf32 / fp16 / bf16 (GPU plans); `explain` also writes explain.yaml and report.txt;
    `bundle` writes only what a deployment loads. Raises CompileError with aicfc's message."""
    tmp = None
    try:
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
        else:
            data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
            tmp = tempfile.NamedTemporaryFile(suffix=".onnx", delete=False)
            tmp.write(data)
            tmp.close()
            path = tmp.name
        cmd = [aicfc_path(), path, "-o", os.fspath(out), "--target", target, "--quiet"]
        for name, value in (dims or {}).items():
            cmd += ["--dim", _dim_flag(name, value)]
        for name, shape in (shapes or {}).items():
            cmd += ["--shape", f"{name}=" + "x".join(str(int(d)) for d in shape)]
        for name, value in (consts or {}).items():
            cmd += ["--const", f"{name}={value}"]
        if precision:
            cmd += ["--precision", precision]
        if plan_for:
            cmd += ["--plan-for", plan_for]
        if explain:
            cmd.append("--explain")
        if bundle:
            cmd.append("--bundle")
        cmd += list(extra_args)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            lines = [l for l in proc.stderr.splitlines() if l.strip()]
            message = next((l[len("error: "):] for l in lines if l.startswith("error: ")),
                           lines[-1] if lines else f"aicfc exited with {proc.returncode}")
            raise CompileError(message, proc.returncode, proc.stderr)
        return Compiled(os.fspath(out), cmd)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)


class Model:
    """An open compiled folder (aicf_open_device). Use `load`."""

    def __init__(self, folder: Union[str, os.PathLike], threads: Optional[int] = None,
                 device: int = 0):
        self.folder = os.fspath(folder)
        self._m = _runtime.Model(self.folder, device)
        if threads is not None:
            self.threads = threads

    @staticmethod
    def _infos(raw: List[Dict[str, Any]]) -> List[TensorInfo]:
        return [TensorInfo(t["name"], t["dtype"], tuple(t["shape"]), t["bytes"]) for t in raw]

    @property
    def inputs(self) -> List[TensorInfo]:
        """The inputs in order, with the shapes last set (a ranged folder: its planned shape
        until a run sets others)."""
        return self._infos(self._m.inputs())

    @property
    def outputs(self) -> List[TensorInfo]:
        return self._infos(self._m.outputs())

    @property
    def input_names(self) -> List[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [t.name for t in self.outputs]

    @property
    def dims(self) -> Dict[str, Tuple[int, int, int]]:
        """Symbolic dims of a ranged folder: name -> (min, max, opt); {} for a static one."""
        return {d["name"]: (d["min"], d["max"], d["opt"]) for d in self._m.dims()}

    @property
    def threads(self) -> Optional[int]:
        return getattr(self, "_threads", None)

    @threads.setter
    def threads(self, n: int) -> None:
        """cpu plans: threads running the steps (1 to 1024), the calling thread included."""
        self._m.set_threads(int(n))
        self._threads = int(n)

    def run(self, feeds: Optional[Mapping[str, Any]] = None, **named: Any) -> Dict[str, np.ndarray]:
        """Runs the folder on {input name: array} (or keyword arguments); returns {output name:
        array} in the folder's output order. Arrays must have the inputs' dtypes; shapes the
        folder accepts (a ranged folder: any within its dims)."""
        return self._m.run(dict(feeds or {}, **named))

    __call__ = run

    def profile(self, feeds: Optional[Mapping[str, Any]] = None, **named: Any
                ) -> Tuple[Dict[str, np.ndarray], List[Dict[str, Any]]]:
        """Like run, also returning each step's kind, kernel symbol and wall time (seconds)."""
        out, secs = self._m.run_profiled(dict(feeds or {}, **named))
        steps = self._m.steps()
        for s, t in zip(steps, secs):
            s["seconds"] = t
        return out, steps

    @property
    def plan(self) -> Dict[str, Any]:
        return _runtime.read_yaml(os.path.join(self.folder, "plan.yaml"))

    def close(self) -> None:
        self._m.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self.outputs)
        return f"aicf.Model({self.folder!r}; {ins} -> {outs})"


def load(folder: Union[str, os.PathLike], threads: Optional[int] = None,
         device: int = 0) -> Model:
    """Opens a folder written by aicfc (or `compile`); a cuda plan on CUDA device `device`
    (one process may hold models on several GPUs; a cpu plan takes 0 only)."""
    return Model(folder, threads, device)


@dataclass
class Explanation:
    """The compiler's account of a folder, as Python objects: `rewrites` (each pattern the
    passes matched, applied or not, with its certificates and their conditions; explain.yaml),
    `coverage`, and `steps` (each plan step's kernel, recipe, knobs, predicted bytes / lower
    bound / time; plan.yaml), with `plan` the whole manifest."""
    rewrites: List[Dict[str, Any]]
    coverage: Any
    steps: List[Dict[str, Any]]
    plan: Dict[str, Any]


def explain(folder: Union[str, os.PathLike]) -> Explanation:
    """Reads a folder compiled with explain=True (aicfc --explain)."""
    folder = os.fspath(folder)
    path = os.path.join(folder, "explain.yaml")
    if not os.path.exists(path):
        raise Error(f"{path} not found: compile with explain=True (aicfc --explain)")
    ex = _runtime.read_yaml(path)
    plan = _runtime.read_yaml(os.path.join(folder, "plan.yaml"))
    return Explanation(ex.get("rewrites") or [], ex.get("coverage"), plan.get("steps") or [], plan)
