#!/usr/bin/env python3
"""`make bench-dyn` (issues 21, 55): each bundled *_dyn model, and each bench CNN exported with a
batch range (bench/models_dyn), compiled once for ranges of its dims against the static compiles
of the same model.

For every testdata model whose name ends in _dyn, every model folder with a ranges.txt in the
other --models folders (or --only), with its args.txt binding each
named dim to a value V (`--dim seq=24`, or `--shape x=8x64` for a leading batch dim) and its
ranges.txt giving the ranges (`--dim seq=1..128@24`; without it, 1..max(64, 4V)@V):
  * compile time: the static compile (args.txt) and the ranged one (ranges.txt), the
    median of --compiles runs each (aicfc wall time, libmodel.so built included);
  * correctness: the ranged folder run at the range's ends, at V and between (aicf-run
    --random --shape ...) against the interpreter on the ONNX model at the same shapes;
  * latency at the optimised shape V: the ranged folder against the static one, runs interleaved
    in rounds (aicf-run --bench, one thread), the median of the rounds' medians; likewise at the
    range's ends, each against a static folder compiled for that shape.
Writes bench/dyn_results.md and prints it. Not part of `make test`.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}")
    return p


def onnx_inputs(model):
    """Graph inputs (name, [dim names or values]) without onnx: read from aicfc --emit graph."""
    import onnx  # the bench venv has it
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims))
    return out


def static_dims(args, inputs):
    """The value args.txt gives each named dim (--dim NAME=V, or a --shape of a named dim)."""
    dims = {}
    for i, a in enumerate(args):
        if a == "--dim":
            k, v = args[i + 1].split("=")
            dims[k] = int(v)
        if a == "--shape":
            name, shape = args[i + 1].split("=")
            vals = [int(x) for x in shape.split("x")]
            for iname, idims in inputs:
                if iname == name:
                    for d, v in zip(idims, vals):
                        if isinstance(d, str) and d:
                            dims[d] = v
    return dims


def shape_flags(inputs, values):
    flags = []
    for name, dims in inputs:
        shape = [values[d] if isinstance(d, str) else d for d in dims]
        flags += ["--shape", f"{name}=" + "x".join(str(v) for v in shape)]
    return flags


def median_bench(build, folder, flags, runs):
    p = run([os.path.join(build, "aicf-run"), folder, "--random", "--threads", "1",
             "--bench", str(runs)] + flags)
    m = re.search(r"median ([0-9.e+-]+) ms", p.stdout)
    return float(m.group(1))


def timed_compile(build, model, flags, out, n):
    times = []
    for _ in range(n):
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        run([os.path.join(build, "aicfc"), model, "-o", out] + flags)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved(a, static_out, static_flags, ranged_out, ranged_flags):
    """Medians of the static and the ranged folder's aicf-run --bench medians, alternated in
    a.rounds rounds of a.runs runs (fewer for slow models: at least ~2 s a round)."""
    first = median_bench(a.build, static_out, static_flags, 5)
    runs = max(5, min(a.runs, int(2000 / max(first, 1e-3))))
    st, rt = [], []
    for _ in range(a.rounds):
        st.append(median_bench(a.build, static_out, static_flags, runs))
        rt.append(median_bench(a.build, ranged_out, ranged_flags, runs))
    return statistics.median(st), statistics.median(rt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--max", type=int, default=0,
                    help="each dim's range maximum (default: 4x its args.txt value, at least 64)")
    ap.add_argument("--compiles", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "bench", "work", "dyn"))
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "dyn_results.md"))
    ap.add_argument("--models", nargs="*", default=[os.path.join(ROOT, "testdata", "models")],
                    help="model folders: testdata/models (its *_dyn models) and others (every "
                    "model with a ranges.txt)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    testdata = os.path.realpath(os.path.join(ROOT, "testdata", "models"))
    found = {}
    for d in a.models:
        if not os.path.isdir(d):
            continue
        for n in sorted(os.listdir(d)):
            if os.path.realpath(d) == testdata:
                wanted = n.endswith("_dyn") or "_dyn_" in n
            else:
                wanted = os.path.exists(os.path.join(d, n, "ranges.txt"))
            if wanted and (not a.only or n in a.only):
                found[n] = os.path.join(d, n)
    names = list(found)
    lines = ["# Symbolic dims: one folder per range against static folders (`make bench-dyn`)",
             "", f"{time.strftime('%Y-%m-%d %H:%M')}, one thread, aicf-run --bench medians "
             f"(interleaved rounds: {a.rounds} x {a.runs} runs); compile times: median of "
             f"{a.compiles} aicfc runs.", "",
             "| model | ranges | compile static s | compile ranged s | ratio | shapes checked "
             "| static ms at opt | ranged ms at opt | ratio | ratio at min | ratio at max |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    failures = 0
    for name in names:
        mdir = found[name]
        model = os.path.join(mdir, "model.onnx")
        args = open(os.path.join(mdir, "args.txt")).read().split()
        inputs = onnx_inputs(model)
        opt = static_dims(args, inputs)
        ranges = {d: (1, a.max or max(64, 4 * v), v) for d, v in opt.items()}
        # The model's own ranges (ranges.txt: --dim NAME=MIN..MAX@OPT, the ones the tests use;
        # e.g. GPT-2's causal-mask buffer bounds seq) unless --max is given.
        rpath = os.path.join(mdir, "ranges.txt")
        if os.path.exists(rpath) and not a.max:
            toks = open(rpath).read().split()
            for i, t in enumerate(toks):
                if t == "--dim":
                    m = re.fullmatch(r"(\w+)=(\d+)\.\.(\d+)@(\d+)", toks[i + 1])
                    ranges[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        rflags = []
        for d, (lo, hi, v) in ranges.items():
            rflags += ["--dim", f"{d}={lo}..{hi}@{v}"]
        work = os.path.join(a.workdir, name)
        static_out, ranged_out = os.path.join(work, "static"), os.path.join(work, "ranged")
        try:
            ts = timed_compile(a.build, model, args, static_out, a.compiles)
            tr = timed_compile(a.build, model, rflags, ranged_out, a.compiles)
        except RuntimeError as e:
            print(f"{name}: {e}", file=sys.stderr)
            lines.append(f"| {name} | {' '.join(rflags)} | | failed: "
                         f"{str(e).splitlines()[-1][:120]} | | | | | | | |")
            failures += 1
            continue
        # Shapes: every dim at its min, at opt, at max, and a ragged value between.
        points = []
        for which in ("min", "opt", "mid", "max"):
            pt = {}
            for d, (lo, hi, v) in ranges.items():
                pt[d] = {"min": lo, "opt": v, "mid": (v + hi) // 2 + 1, "max": hi}[which]
            if pt not in points:
                points.append(pt)
        checked = []
        for pt in points:
            flags = shape_flags(inputs, pt)
            ref = os.path.join(work, "ref_" + "_".join(f"{k}{v}" for k, v in pt.items()))
            run([os.path.join(a.build, "aicf-run"), model, "--random", "--output-dir", ref] +
                flags)
            p = run([os.path.join(a.build, "aicf-run"), ranged_out, "--random", "--reference",
                     ref] + flags, check=False)
            ok = p.returncode == 0
            failures += 0 if ok else 1
            checked.append(",".join(f"{k}={v}" for k, v in pt.items()) + ("" if ok else " FAIL"))
        optflags = shape_flags(inputs, {d: r[2] for d, r in ranges.items()})
        ms_s, ms_r = interleaved(a, static_out, [], ranged_out, optflags)
        # The range's ends: the ranged folder against a static compile of that shape.
        ends = []
        for which in (0, 1):
            flags = shape_flags(inputs, {d: r[which] for d, r in ranges.items()})
            end_out = os.path.join(work, ("min", "max")[which])
            run([os.path.join(a.build, "aicfc"), model, "-o", end_out] + flags)
            s_end, r_end = interleaved(a, end_out, [], ranged_out, flags)
            ends.append(f"{r_end / s_end:.3f} ({s_end:.3g} ms)")
        lines.append(f"| {name} | {' '.join(rflags)} | {ts:.2f} | {tr:.2f} | {tr / ts:.2f} | "
                     f"{'; '.join(checked)} | {ms_s:.4f} | {ms_r:.4f} | {ms_r / ms_s:.3f} | "
                     f"{ends[0]} | {ends[1]} |")
    text = "\n".join(lines) + "\n"
    with open(a.results, "w") as f:
        f.write(text)
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
