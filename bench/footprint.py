#!/usr/bin/env python3
"""`make bench-footprint` (issue 55): what N processes serving one model cost in memory, and how
long a process takes from its start to its first result, for aicf and its CPU peers.

    bench/.venv/bin/python bench/footprint.py [--model bench/models_footprint/resnet50]
        [--processes 1,2,4] [--build build] [--workdir bench/work/footprint]
        [--results bench/footprint.md]

For each engine and each N, N worker processes (bench/footprint.py --worker) start at once; each
loads the model, runs it once on the model's stored input (the time from its start to that
result is its first-result time), checks the output against the reference, and waits. With all
N waiting, each one's RSS and PSS are read from /proc/PID/smaps_rollup (PSS splits every shared
page among the processes mapping it: the sum over processes is what the N really occupy), then
they are released. Engines, each with its own sharing options:
- aicf (map): the folder as aicf_open loads it by default, weights.bin mapped read-only and
  shared through the page cache;
- aicf (copy): AICF_WEIGHTS=copy, weights read into private huge pages (one copy per process);
- ORT: an InferenceSession per process (ONNX Runtime shares prepacked weights only between
  sessions of one process);
- OV: OpenVINO's IR (model.xml / model.bin, saved once by ov.save_model) compiled per process,
  which OpenVINO reads through mmap (its default `ENABLE_MMAP`);
- python: the worker with numpy and nothing else, the interpreter's own share, to subtract.
Every worker runs one thread. The files are read once before timing (a warm page cache: what a
second instance on a serving machine sees).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENGINES = ["python", "aicf (map)", "aicf (copy)", "ORT", "OV"]


def worker(engine, target, inp, ref, started):
    """Loads, runs once, reports, waits for a line on stdin."""
    import numpy as np
    x = np.load(inp)
    want = np.load(ref) if ref else None
    got = None
    if engine.startswith("aicf"):
        sys.path.insert(0, HERE)
        from harness import AicfEngine, AicfLib
        e = AicfEngine(AicfLib(os.path.join(target[1], "libaicf_runtime.so")), target[0],
                       {"input": x})
        e.set_threads(1)
        e.run()
        got = next(iter(e.results().values()))
    elif engine == "ORT":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        s = ort.InferenceSession(target[0], so, providers=["CPUExecutionProvider"])
        got = s.run(None, {s.get_inputs()[0].name: x})[0]
    elif engine == "OV":
        import openvino as ov
        cm = ov.Core().compile_model(target[0], "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1",
            "NUM_STREAMS": "1", "PERFORMANCE_HINT": "LATENCY"})
        req = cm.create_infer_request()
        req.infer({cm.inputs[0].get_any_name(): x})
        got = req.get_output_tensor(0).data.copy()
    first = time.time() - started
    ok = want is None or got is None or bool(np.allclose(got, want, rtol=1e-3, atol=1e-3))
    print(f"first {first:.4f} ok {int(ok)}", flush=True)
    sys.stdin.readline()


def smaps(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss"):
                out[k] = int(rest.split()[0]) * 1024
    return out


def measure(engine, target, inp, ref, n, env):
    """N workers at once: per worker (first-result s, ok, rss, pss)."""
    procs = []
    for _ in range(n):
        args = [sys.executable, os.path.abspath(__file__), "--worker", engine, *target, inp,
                ref or "", repr(time.time())]
        procs.append(subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env))
    rows = []
    for p in procs:
        line = p.stdout.readline().split()
        if len(line) < 4:
            p.kill()
            raise RuntimeError(f"{engine}: worker failed (exit {p.wait()})")
        rows.append([float(line[1]), line[3] == "1"])
    for p, r in zip(procs, rows):
        m = smaps(p.pid)
        r += [m["Rss"], m["Pss"]]
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait()
    return rows


def prepare(a):
    """The aicf folder and OpenVINO's IR for the model, made once."""
    model = os.path.join(a.model, "model.onnx")
    folder = os.path.join(a.workdir, "aicf")
    if not os.path.exists(os.path.join(folder, "plan.yaml")):
        subprocess.run([os.path.join(a.build, "aicfc"), model, "-o", folder], check=True)
    ir = os.path.join(a.workdir, "ov", "model.xml")
    if not os.path.exists(ir):
        import openvino as ov
        os.makedirs(os.path.dirname(ir), exist_ok=True)
        ov.save_model(ov.Core().read_model(model), ir, compress_to_fp16=False)
    for f in (os.path.join(folder, "weights.bin"), model, ir[:-4] + ".bin"):
        with open(f, "rb") as fh:  # warm the page cache
            while fh.read(1 << 24):
                pass
    return model, folder, ir


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "bench", "models_footprint", "resnet50"))
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "bench", "work", "footprint"))
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "footprint.md"))
    a = ap.parse_args()
    counts = [int(n) for n in a.processes.split(",")]
    model, folder, ir = prepare(a)
    import yaml
    plan = yaml.safe_load(open(os.path.join(folder, "plan.yaml")))
    wbytes = int(plan["weights"]["bytes"])
    arena = int(plan["arena"]["bytes"])
    inp = os.path.join(a.model, "inputs", "input.npy")
    ref = os.path.join(a.model, "outputs", "output.npy")
    targets = {"python": [""], "aicf (map)": [folder, a.build], "aicf (copy)": [folder, a.build],
               "ORT": [model], "OV": [ir]}
    res = {}
    for n in counts:
        for eng in ENGINES:
            env = dict(os.environ, AICF_WEIGHTS="copy" if eng == "aicf (copy)" else "map",
                       OMP_NUM_THREADS="1")
            tgt = targets[eng] + ([""] if len(targets[eng]) == 1 else [])
            try:
                res[(eng, n)] = measure(eng, tgt, inp, ref, n, env)
            except Exception as e:  # noqa: BLE001
                res[(eng, n)] = str(e)
            print(f"[footprint] {eng} x{n}: {res[(eng, n)]}", file=sys.stderr, flush=True)
    mb = 1 << 20
    L = ["# Memory footprint and first-result time (`make bench-footprint`)\n",
         f"Model `{os.path.relpath(a.model, ROOT)}`: aicf weights.bin {wbytes / mb:.1f} MiB, arena "
         f"{arena / mb:.1f} MiB. Generated {time.strftime('%Y-%m-%d %H:%M')} by bench/footprint.py "
         "(how it measures: its docstring). PSS and RSS summed over the N processes, MiB; "
         "first result: the slowest of the N, seconds from process start (the interpreter's "
         "start-up included; see the python row).\n",
         "| engine | N | total PSS | total RSS | PSS per process | first result (s) | output |",
         "|---|---|---|---|---|---|---|"]
    for eng in ENGINES:
        for n in counts:
            r = res[(eng, n)]
            if isinstance(r, str):
                L.append(f"| {eng} | {n} | {r} | | | | |")
                continue
            pss, rss = sum(x[3] for x in r), sum(x[2] for x in r)
            L.append(f"| {eng} | {n} | {pss / mb:.1f} | {rss / mb:.1f} | {pss / n / mb:.1f} | "
                     f"{max(x[0] for x in r):.2f} | "
                     f"{'ok' if all(x[1] for x in r) else '**MISMATCH**'} |")
    base = res.get(("python", max(counts)))
    mine = res.get(("aicf (map)", max(counts)))
    if not isinstance(base, str) and not isinstance(mine, str) and base and mine:
        n = max(counts)
        own = (sum(x[3] for x in mine) - sum(x[3] for x in base)) / mb
        budget = (wbytes + n * (arena + 10 * mb)) / mb
        L.append(f"\n{n} aicf processes less {n} bare interpreters: {own:.1f} MiB of PSS against "
                 f"the budget weights + {n} x (arena + 10 MiB) = {budget:.1f} MiB: "
                 f"{'within' if own <= budget else '**over**'}.")
    md = "\n".join(L) + "\n"
    with open(a.results, "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        eng, t0, t1, inp, ref, started = sys.argv[2:8]
        worker(eng, [t0, t1], inp, ref, float(started))
    else:
        main()
