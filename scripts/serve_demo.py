"""Serves a model on Triton Inference Server through the aicf Python package, and the same model
through ONNX Runtime in the same setup, and checks both under concurrent load (make serve-demo;
scripts/serve_demo.sh sets up the environment).

--model cnn (the default): a bench CNN exported with its batch dim named (scripts/gen_cnn_models.py
--batch-range, resnet18 unless --cnn), compiled once with aicf.compile for batch 1..16, so one
folder serves every batch Triton's dynamic batcher forms. A pool of seeded images has its
references from ONNX Runtime (one run over the whole pool); images are independent, so each
answer is checked against the references of the images it sent.
--model mlp: testdata/models/mlp_dyn_op13 (batch 1..64), checked against the stored PyTorch
outputs of the rows sent.

PyTriton (PyPI nvidia-pytriton, which bundles tritonserver) runs the server in this process on
loopback with INSTANCES model instances: for aicf each its own aicf.load of the folder (one model
runs one call at a time; separate loads run in parallel, the GIL released while they run), for
ONNX Runtime each its own InferenceSession with the same threads per instance. CLIENTS client
threads send REQUESTS requests each (1-4 images, 1-8 MLP rows), the same sequence for both
engines; every answer is checked with the tolerance of the C++ tests (1e-4 + 1e-4 |want|). Prints
throughput, p50 / p99 latency and the batch sizes the batcher formed per engine, then stops the
server. Exit 0 when every answer of every engine matched within --time-limit seconds.
"""
import argparse
import collections
import os
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import aicf
from pytriton.client import ModelClient
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """What is served: the ONNX model, its input and output, the batch range, the pool of
    inputs with their references, and how many pool entries a request takes."""

    def __init__(self, args):
        import onnxruntime as ort
        if args.model == "mlp":
            d = os.path.join(ROOT, "testdata", "models", "mlp_dyn_op13")
            self.name, self.onnx = "mlp", os.path.join(d, "model.onnx")
            self.input, self.output, self.max_batch, self.opt = "x", "logits", 64, 16
            self.pool = np.load(os.path.join(d, "inputs", "x.npy"))
            self.want = np.load(os.path.join(d, "outputs", "logits.npy"))
            self.per_request, self.reference = (1, 8), "the stored PyTorch outputs"
        else:
            d = os.path.join(ROOT, "bench", "models_dyn", args.cnn)
            self.name, self.onnx = args.cnn, os.path.join(d, "model.onnx")
            self.input, self.output, self.max_batch, self.opt = "input", "output", 16, 4
            self.pool = np.random.default_rng(0).standard_normal(
                (16, 3, 224, 224)).astype(np.float32)
            sess = ort.InferenceSession(self.onnx, providers=["CPUExecutionProvider"])
            self.want = sess.run(None, {self.input: self.pool})[0]
            self.per_request, self.reference = (1, 4), "ONNX Runtime's outputs"
        self.unit = "rows" if args.model == "mlp" else "images"
        self.row_shape = tuple(self.pool.shape[1:])
        self.out_shape = tuple(self.want.shape[1:])


def aicf_instances(served, args, work):
    folder = os.path.join(work, served.name)
    t0 = time.monotonic()
    aicf.compile(served.onnx, folder, dims={"batch": (1, served.max_batch, served.opt)},
                 bundle=True)
    print(f"aicf: compiled {served.onnx} for batch 1..{served.max_batch} into {folder} "
          f"({time.monotonic() - t0:.1f} s)")
    models = [aicf.load(folder, threads=args.threads) for _ in range(args.instances)]
    return [lambda x, m=m: m.run({served.input: x})[served.output] for m in models]


def ort_instances(served, args):
    import onnxruntime as ort
    out = []
    for _ in range(args.instances):
        o = ort.SessionOptions()
        o.intra_op_num_threads = args.threads
        o.inter_op_num_threads = 1
        sess = ort.InferenceSession(served.onnx, o, providers=["CPUExecutionProvider"])
        out.append(lambda x, s=sess: s.run(None, {served.input: x})[0])
    return out


def serve(engine, runners, served, args, start):
    """Serves `runners` (one per instance: a batch in, the output batch out) and sends the load;
    returns the summary line's figures and the failures."""
    batch_sizes = collections.Counter()
    lock = threading.Lock()

    def make_infer(run):
        @batch
        def infer(**inputs):
            x = np.ascontiguousarray(inputs[served.input], dtype=np.float32)
            with lock:
                batch_sizes[x.shape[0]] += 1
            return {served.output: run(x)}

        return infer

    ports = dict(http_port=free_port(), grpc_port=free_port(), metrics_port=free_port())
    config = TritonConfig(http_address="127.0.0.1", grpc_address="127.0.0.1",
                          metrics_address="127.0.0.1", **ports)
    failures, latencies = [], []
    with Triton(config=config) as triton:
        triton.bind(
            model_name=served.name,
            infer_func=[make_infer(r) for r in runners],  # one Triton model instance each
            inputs=[Tensor(name=served.input, dtype=np.float32, shape=served.row_shape)],
            outputs=[Tensor(name=served.output, dtype=np.float32, shape=served.out_shape)],
            config=ModelConfig(max_batch_size=served.max_batch,
                               batcher=DynamicBatcher(max_queue_delay_microseconds=2000)),
            strict=True,
        )
        triton.run()
        url = f"http://127.0.0.1:{ports['http_port']}"
        print(f"{engine}: Triton serving '{served.name}' at {url}: {args.instances} instances, "
              f"dynamic batching up to {served.max_batch}")
        per_client = [args.requests // args.clients + (c < args.requests % args.clients)
                      for c in range(args.clients)]
        lo, hi = served.per_request

        def client(c, count):
            rng = np.random.default_rng(c)  # the same requests for every engine
            with ModelClient(url, served.name, init_timeout_s=120) as mc:
                for _ in range(count):
                    if time.monotonic() - start > args.time_limit:
                        failures.append("time limit reached")
                        return
                    rows = rng.integers(0, served.pool.shape[0], size=int(rng.integers(lo, hi + 1)))
                    t = time.monotonic()
                    got = mc.infer_batch(**{served.input: served.pool[rows]})[served.output]
                    dt = time.monotonic() - t
                    want = served.want[rows]
                    if got.shape != want.shape or not np.all(
                            np.abs(got - want) <= 1e-4 + 1e-4 * np.abs(want)):
                        failures.append(f"{engine} client {c}: rows {rows.tolist()} differ: max "
                                        f"err {float(np.max(np.abs(got - want))):.3g}")
                    with lock:
                        latencies.append(dt)

        t0 = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda a: client(*a), enumerate(per_client)))
        wall = time.monotonic() - t0
    # The server has stopped here (the with block).
    lat = np.array(sorted(latencies)) * 1e3
    formed = sorted(batch_sizes.items())
    rows_served = sum(size * n for size, n in formed)
    done = len(latencies)
    print(f"{engine}: {done} requests from {args.clients} concurrent clients in {wall:.2f} s: "
          f"{done / wall:.1f} requests/s, {rows_served / wall:.1f} {served.unit}/s; latency p50 "
          f"{np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms")
    print(f"{engine}: batches the dynamic batcher formed ({served.unit}: count): "
          + ", ".join(f"{s}: {n}" for s, n in formed))
    print(f"{engine}: answers checked against {served.reference}: {done - len(failures)} of "
          f"{args.requests} correct")
    row = (engine, done / wall, rows_served / wall, np.percentile(lat, 50),
           np.percentile(lat, 99))
    return row, failures, done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--cnn", default="resnet18", help="the bench CNN in bench/models_dyn")
    ap.add_argument("--engines", default="aicf,ort", help="aicf, ort or both (comma-separated)")
    ap.add_argument("--requests", type=int, default=0, help="default: 2000 (mlp), 400 (cnn)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per instance")
    ap.add_argument("--time-limit", type=float, default=600.0)
    args = ap.parse_args()
    args.requests = args.requests or (2000 if args.model == "mlp" else 400)
    start = time.monotonic()
    served = Served(args)
    work = tempfile.mkdtemp(prefix="aicf-serve-")
    rows, all_failures, ok = [], [], True
    for engine in args.engines.split(","):
        runners = aicf_instances(served, args, work) if engine == "aicf" else ort_instances(
            served, args)
        row, failures, done = serve(engine, runners, served, args, start)
        rows.append(row)
        all_failures += failures
        ok = ok and not failures and done == args.requests
    print(f"\n| engine | requests/s | {served.unit}/s | p50 ms | p99 ms |\n|---|---|---|---|---|")
    for engine, rps, ips, p50, p99 in rows:
        print(f"| {engine} | {rps:.1f} | {ips:.1f} | {p50:.1f} | {p99:.1f} |")
    for f in all_failures[:10]:
        print("FAIL:", f)
    print("serve-demo:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
