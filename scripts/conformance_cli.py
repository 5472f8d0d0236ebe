#!/usr/bin/env python3
"""ONNX backend node tests through the command line, as a user runs a model (issue 20):
`make conformance-cli`.

For every test under /usr/share/libonnx-testdata/data/node (Debian's libonnx-testdata) and, when
given, every test a directory of the PyPI onnx wheel's generated node tests holds: the inputs of
test_data_set_0 written as .npy, `aicfc model.onnx -o OUT`, and `aicf-run OUT --input NAME=FILE.npy
... --output-dir RES`; each output compared with the reference (|got - want| <= 1e-4 + 1e-3 |want|,
NaN matches NaN; a bfloat16 output gets one bf16 step, 2^-7 relative, more). An input aicfc reports as "not a compile-time constant" is bound with
`--const NAME=FILE.npy` and the compile retried (when the value is computed inside the graph,
every integer input is bound at once), as a user following the message would.

Prints one table per source: tests, those whose ops aicf imports (no "unsupported op" or
"unknown domain" error), passing, and the failures by kind; with --list, every failing test with
its reason. With --peer-ort, ONNX Runtime runs the same tests (those whose ops aicf imports) and its count is
printed beside. With --passing DIR, the passing tests are guarded as the in-process lists are:
DIR/<source>_cli_passing.txt lists them (testdata/conformance/), and a listed test that fails is
reported as a REGRESSION with exit status 1 (--update rewrites the lists). Usage: conformance_cli.py BUILD_DIR WORK_DIR [--onnx-tests DIR] [--jobs N]
[--list] [--only SUBSTRING] [--no-libonnx] [--peer-ort]
"""
import argparse
import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

LIBONNX = "/usr/share/libonnx-testdata/data/node"
NOT_CONST = re.compile(r"input '([^']+)' is not a compile-time constant")
# A length known only at run time with no bound from the model (a loop's scan outputs): a user
# gives one with --max NAME=N; the node tests' lengths are small.
NEEDS_MAX = re.compile(r"--max (\S+)=N")
RUN_TIME_MAX = 4096


def close(got, want, bf16=False):
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, want {want.dtype}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        return "" if np.array_equal(got, want) else "values differ"
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    if np.any(np.isnan(g) != nan):
        return "NaN where the reference has none (or the other way)"
    # bfloat16 outputs: one bf16 step (2^-7 relative) on top of the f32 tolerance.
    rtol = 1e-3 + (2.0 ** -7 if bf16 else 0.0)
    ok = (np.abs(g - w) <= 1e-4 + rtol * np.abs(w)) | nan | (g == w)
    return "" if np.all(ok) else f"max abs error {np.nanmax(np.abs(g - w)[~ok]):.3g}"


def bf16_as_f32(t, declared):
    """A TensorProto as an array; bfloat16 (no NumPy dtype; older test data stores its bits as
    uint16 under the model's bfloat16 type `declared`) as the float32 it widens to exactly, which
    is how aicf's .npy files hold bfloat16."""
    a = numpy_helper.to_array(t)
    if onnx.TensorProto.BFLOAT16 in (t.data_type, declared):
        bits = a.view(np.uint16) if a.dtype.itemsize == 2 else a.astype(np.uint16)
        a = (bits.astype(np.uint32) << 16).view(np.float32)
    return a


def read_proto(ds, kind, k, proto, missing):
    """test_data_set's <kind>_<k>.pb parsed into `proto`; ValueError `missing` when absent."""
    p = os.path.join(ds, f"{kind}_{k}.pb")
    if not os.path.exists(p):
        raise ValueError(f"{kind} {k} {missing}")
    with open(p, "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def read_tensor(ds, kind, k, declared):
    """test_data_set's <kind>_<k>.pb as an array (bf16_as_f32); ValueError when it is missing
    (a sequence, map or optional the generator did not write as a tensor)."""
    t = read_proto(ds, kind, k, onnx.TensorProto(), "is not a tensor (a sequence, map or optional)")
    try:
        return bf16_as_f32(t, declared)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{kind} {k}: {e}") from e


def read_sequence(ds, kind, k):
    """test_data_set's <kind>_<k>.pb as the list of arrays of a sequence of tensors."""
    seq = read_proto(ds, kind, k, onnx.SequenceProto(), "is not written (an optional or map)")
    if seq.elem_type != onnx.SequenceProto.TENSOR:
        raise ValueError(f"{kind} {k} is a sequence of non-tensors")
    return [numpy_helper.to_array(t) for t in seq.tensor_values]


def read_optional(ds, kind, k):
    """test_data_set's <kind>_<k>.pb as an optional: ("tensor", array), ("sequence", [arrays])
    or (None, None) when it holds no element."""
    o = read_proto(ds, kind, k, onnx.OptionalProto(), "is not written")
    if o.elem_type == onnx.OptionalProto.TENSOR and o.HasField("tensor_value"):
        return "tensor", numpy_helper.to_array(o.tensor_value)
    if o.elem_type == onnx.OptionalProto.SEQUENCE and o.HasField("sequence_value"):
        return "sequence", [numpy_helper.to_array(t) for t in o.sequence_value.tensor_values]
    return None, None


def run_test(build, work, tdir):
    name = os.path.basename(tdir)
    wd = os.path.join(work, name)
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(wd)
    model_path = os.path.join(tdir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - any load failure is the test's result
        return name, "load", str(e)
    inits = {t.name for t in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in inits]
    outputs = [v.name for v in model.graph.output]
    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)}
    ds = os.path.join(tdir, "test_data_set_0")
    files, integer, seq_flags = {}, [], []
    vtypes = {v.name: v.type for v in list(model.graph.input) + list(model.graph.output)}
    for k, n in enumerate(inputs):
        opt = None
        if vtypes[n].HasField("optional_type"):  # present (its element) or --absent
            try:
                opt, val = read_optional(ds, "input", k)
            except Exception as e:  # noqa: BLE001
                return name, "dtype", str(e)
            if opt is None:
                seq_flags.append(f"--absent={n}")
                continue
        if vtypes[n].HasField("sequence_type") or opt == "sequence":
            try:
                elems = val if opt else read_sequence(ds, "input", k)
            except Exception as e:  # noqa: BLE001
                return name, "dtype", str(e)
            seq_flags.append(f"--seq={n}={len(elems)}")
            for j, a in enumerate(elems):  # each element's shape, as aicfc asks for it
                p = os.path.join(wd, f"in_{k}_{j}.npy")
                np.save(p, a)
                files[f"{n}.{j}"] = p
                seq_flags.append(f"--shape={n}.{j}={'x'.join(str(d) for d in a.shape)}")
            continue
        try:
            a = val if opt else read_tensor(ds, "input", k, types.get(n, 0))
        except Exception as e:  # noqa: BLE001
            return name, "dtype", str(e)
        p = os.path.join(wd, f"in_{k}.npy")
        np.save(p, a)
        files[n] = p
        if a.dtype in (np.int64, np.int32):
            integer.append(n)
    const, shaped = [], False
    out = os.path.join(wd, "out")
    while True:
        cmd = [os.path.join(build, "aicfc"), model_path, "-o", out] + seq_flags + \
            [f"--const={n}={files[n]}" for n in const]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            break
        msg = r.stderr.strip()
        if "unsupported op" in msg or "unknown domain" in msg:
            return name, "unsupported", msg
        if "unbound dynamic dim" in msg and not shaped:  # each input's shape, as the error asks
            shaped = True
            seq_flags += [f"--shape={n}={'x'.join(str(d) for d in np.load(files[n]).shape)}"
                          for n in inputs if n in files]
            continue
        mx = NEEDS_MAX.search(msg)
        if mx and f"--max={mx.group(1)}={RUN_TIME_MAX}" not in seq_flags:
            seq_flags.append(f"--max={mx.group(1)}={RUN_TIME_MAX}")
            continue
        m = NOT_CONST.search(msg)
        if not m:
            return name, "compile", msg
        # The named input itself; for a value computed inside the graph, the integer inputs
        # (sizes, counts) first, then every input (a Range over its inputs folds to a constant).
        if m.group(1) in files:
            add = [m.group(1)] if m.group(1) not in const else []
        else:
            add = [n for n in integer if n not in const] or [n for n in files if n not in const]
        if not add:
            return name, "compile", msg
        const += add
        # (a constant may bound or unroll what needed --max: asked again if still needed)
        seq_flags = [f for f in seq_flags if not f.startswith("--max=")]
    res = os.path.join(wd, "res")
    os.makedirs(res)
    runtime_inputs = [n for n in files if n not in const]
    cmd = [os.path.join(build, "aicf-run"), out, "--output-dir", res] + \
        [f"--input={n}={files[n]}" for n in runtime_inputs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return name, "run", r.stderr.strip()
    for k, o in enumerate(outputs):
        try:
            if vtypes[o].HasField("optional_type"):  # its element, or no file at all
                opt, val = read_optional(ds, "output", k)
                if opt is None:
                    if os.path.exists(os.path.join(res, f"{o}.npy")):
                        return name, "mismatch", f"output {o}: written, the optional is empty"
                    continue
                wants = [(o, val)] if opt == "tensor" else \
                    [(f"{o}.{j}", a) for j, a in enumerate(val)]
            elif vtypes[o].HasField("sequence_type"):  # written as its elements o.0, o.1, ...
                wants = [(f"{o}.{j}", a) for j, a in enumerate(read_sequence(ds, "output", k))]
            else:
                wants = [(o, read_tensor(ds, "output", k, types.get(o, 0)))]
        except Exception as e:  # noqa: BLE001
            return name, "dtype", str(e)
        for on, want in wants:
            p = os.path.join(res, f"{on}.npy")
            if not os.path.exists(p):
                return name, "run", f"no output file {on}.npy"
            why = close(np.load(p), want, types.get(o, 0) == onnx.TensorProto.BFLOAT16)
            if why:
                return name, "mismatch", f"output {on}: {why}"
    shutil.rmtree(wd, ignore_errors=True)
    return name, "pass", ""


def ort_passes(tdir):
    """Whether ONNX Runtime (CPU provider, as installed in the bench venv) runs the test and
    matches its test_data_set_0 under the same tolerance: the peer's figure on the same tests."""
    import onnxruntime as ort

    try:
        model = onnx.load(os.path.join(tdir, "model.onnx"))
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        inits = {t.name for t in model.graph.initializer}
        inputs = [v for v in model.graph.input if v.name not in inits]
        ds = os.path.join(tdir, "test_data_set_0")
        feed = {}
        for k, v in enumerate(inputs):  # tensors, sequences (lists) and optionals (or None)
            if v.type.HasField("sequence_type"):
                feed[v.name] = read_sequence(ds, "input", k)
            elif v.type.HasField("optional_type"):
                feed[v.name] = read_optional(ds, "input", k)[1]
            else:
                feed[v.name] = numpy_helper.to_array(
                    read_proto(ds, "input", k, onnx.TensorProto(), "is not written"))
        got = sess.run(None, feed)
        for k, o in enumerate(model.graph.output):
            if o.type.HasField("sequence_type") or o.type.HasField("optional_type"):
                kind, want = ("sequence", read_sequence(ds, "output", k)) \
                    if o.type.HasField("sequence_type") else read_optional(ds, "output", k)
                if kind is None:
                    if got[k] is not None:
                        return False
                    continue
                gs = got[k] if kind == "sequence" else [got[k]]
                ws = want if kind == "sequence" else [want]
                if len(gs) != len(ws) or any(close(np.asarray(a), b) for a, b in zip(gs, ws)):
                    return False
                continue
            want = read_tensor(ds, "output", k, o.type.tensor_type.elem_type)
            g = np.asarray(got[k])
            bf16 = o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
            if bf16:
                g = bf16_as_f32(numpy_helper.from_array(g), o.type.tensor_type.elem_type)
            if close(g, want, bf16):
                return False
        return True
    except Exception:  # noqa: BLE001 - any failure to load, run or read is a failed test
        return False


def generate_node_tests(out):
    """Writes the installed onnx wheel's node tests (its backend test generators) under `out`,
    one NAME/{model.onnx, test_data_set_K/*.pb} per case, as libonnx-testdata lays them out."""
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (ins, outs) in enumerate(case.data_sets):
            dd = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(dd, exist_ok=True)
            for kind, vals, decls in (("input", ins, case.model.graph.input),
                                      ("output", outs, case.model.graph.output)):
                for j, v in enumerate(vals):
                    if decls[j].type.HasField("sequence_type") and isinstance(v, list):
                        t = numpy_helper.from_list([np.asarray(e) for e in v], decls[j].name)
                    elif decls[j].type.HasField("optional_type"):
                        t = numpy_helper.from_optional(
                            v if v is None or isinstance(v, list) else np.asarray(v),
                            decls[j].name)
                    elif not decls[j].type.HasField("tensor_type"):
                        continue  # maps: not written
                    else:
                        t = v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(
                            np.asarray(v), decls[j].name)
                    with open(os.path.join(dd, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(t.SerializeToString())
    return len(cases)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--onnx-tests", help="a directory for the onnx wheel's node tests (written "
                    "there first when it has none)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--no-libonnx", action="store_true", help="only the wheel's tests")
    ap.add_argument("--only", default="")
    ap.add_argument("--passing", help="a directory of guarded lists (<source>_cli_passing.txt): "
                    "a listed test that fails is a regression (exit 1); written when absent")
    ap.add_argument("--update", action="store_true", help="rewrite the --passing lists")
    ap.add_argument("--peer-ort", action="store_true", help="also run ONNX Runtime on the tests "
                    "whose ops aicf imports and print how many it passes")
    a = ap.parse_args()
    sources = [] if a.no_libonnx else [("libonnx-testdata", LIBONNX)]
    if a.onnx_tests:
        # The generated tests carry a stamp of this script's layout (sequences and optionals
        # written since stamp 2); an older or partial folder is written again.
        stamp = os.path.join(a.onnx_tests, ".aicf-node-tests-2")
        if not os.path.exists(stamp):
            shutil.rmtree(a.onnx_tests, ignore_errors=True)
            os.makedirs(a.onnx_tests)
            print(f"writing the onnx {onnx.__version__} node tests to {a.onnx_tests}: "
                  f"{generate_node_tests(a.onnx_tests)} cases")
            open(stamp, "w").close()
        sources.append(("onnx wheel " + onnx.__version__, a.onnx_tests))
    failed_any = False  # a listed test that no longer passes (--passing)
    for label, root in sources:
        tests = sorted(d for d in os.listdir(root) if a.only in d and
                       os.path.exists(os.path.join(root, d, "model.onnx")))
        work = os.path.join(a.work, re.sub(r"[^A-Za-z0-9_.-]", "_", label))
        os.makedirs(work, exist_ok=True)
        with cf.ThreadPoolExecutor(a.jobs) as ex:
            results = list(ex.map(lambda d: run_test(a.build, work, os.path.join(root, d)), tests))
        kinds = {}
        for n, k, why in results:
            kinds.setdefault(k, []).append((n, why))
        covered = len(results) - len(kinds.get("unsupported", []))
        passed = len(kinds.get("pass", []))
        print(f"\n## {label}: {len(results)} tests, {covered} of ops aicf imports, {passed} pass")
        print("| result | tests |\n|---|---|")
        for k in ("pass", "compile", "run", "mismatch", "dtype", "load", "unsupported"):
            if k in kinds:
                print(f"| {k} | {len(kinds[k])} |")
        if a.peer_ort:
            imported = [n for n, k, _ in results if k != "unsupported"]
            ort_ok = [n for n in imported if ort_passes(os.path.join(root, n))]
            print(f"ONNX Runtime {__import__('onnxruntime').__version__} on the same "
                  f"{len(imported)} tests: {len(ort_ok)} pass")
        if a.list:
            for k, items in sorted(kinds.items()):
                if k != "pass":
                    for n, why in items:
                        print(f"{k}\t{n}\t{why.splitlines()[-1][:200] if why else ''}")
        if a.passing:
            # The guarded list: every test once passing must still pass (--update rewrites it).
            key = "libonnx" if label.startswith("libonnx") else "onnx_wheel"
            path = os.path.join(a.passing, key + "_cli_passing.txt")
            now = sorted(n for n, k, _ in results if k == "pass")
            before = []
            if os.path.exists(path):
                with open(path) as f:
                    before = [ln.strip() for ln in f if ln.strip()]
            # The tests this run covered (--only, or another wheel, runs fewer); the rest of the
            # list stands as it was.
            present = {n for n, _, _ in results}
            if a.update or not os.path.exists(path):
                keep = sorted((set(before) - present) | set(now))
                with open(path, "w") as f:
                    f.write("".join(n + "\n" for n in keep))
                print(f"wrote {len(keep)} passing tests to {path}")
            else:
                lost = sorted((set(before) & present) - set(now))
                gained = sorted(set(now) - set(before))
                print(f"{path}: {len(before)} listed, {len(gained)} newly passing "
                      f"(--update adds them)")
                for n in lost:
                    why = next((w for t, _, w in results if t == n), "")
                    print(f"REGRESSION\t{n}\t{why.splitlines()[-1][:200] if why else ''}")
                failed_any = failed_any or bool(lost)
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
