"""Serves a bundled model on Triton Inference Server through the aicf Python package and checks
it under concurrent load (make serve-demo; scripts/serve_demo.sh sets up the environment).

The model (testdata/models/mlp_dyn_op13, an MLP whose batch dim is symbolic) is compiled once
with aicf.compile for batch 1..64, so one folder serves every batch Triton's dynamic batcher
forms. PyTriton (PyPI nvidia-pytriton, which bundles tritonserver) runs the server in this
process on loopback, with INSTANCES model instances, each its own aicf.load of the folder (one
model runs one call at a time; separate loads run in parallel, the GIL released while they
run). CLIENTS client threads send REQUESTS requests of 1-8 rows each (rows drawn from the stored
input); every answer is checked against the stored PyTorch outputs of those rows (rows are
independent in an MLP), with the tolerance of the C++ tests (1e-4 + 1e-4 |want|). Prints
throughput, p50 / p99 latency and the batch sizes the batcher formed, then stops the server.
Exit 0 when every answer matched and the run finished within --time-limit seconds.
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
MODEL = os.path.join(ROOT, "testdata", "models", "mlp_dyn_op13")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="aicf threads per instance")
    ap.add_argument("--time-limit", type=float, default=300.0)
    args = ap.parse_args()
    start = time.monotonic()

    x_all = np.load(os.path.join(MODEL, "inputs", "x.npy"))
    want_all = np.load(os.path.join(MODEL, "outputs", "logits.npy"))
    work = tempfile.mkdtemp(prefix="aicf-serve-")
    folder = os.path.join(work, "mlp")
    t0 = time.monotonic()
    aicf.compile(os.path.join(MODEL, "model.onnx"), folder, dims={"batch": (1, 64, 16)},
                 bundle=True)
    print(f"compiled {MODEL}/model.onnx for batch 1..64 into {folder} "
          f"({time.monotonic() - t0:.1f} s)")

    batch_sizes = collections.Counter()
    lock = threading.Lock()

    def make_infer(model):
        @batch
        def infer(x):
            with lock:
                batch_sizes[x.shape[0]] += 1
            return model.run(x=np.ascontiguousarray(x, dtype=np.float32))

        return infer

    instances = [make_infer(aicf.load(folder, threads=args.threads))
                 for _ in range(args.instances)]
    ports = dict(http_port=free_port(), grpc_port=free_port(), metrics_port=free_port())
    config = TritonConfig(http_address="127.0.0.1", grpc_address="127.0.0.1",
                          metrics_address="127.0.0.1", **ports)
    failures, latencies = [], []
    with Triton(config=config) as triton:
        triton.bind(
            model_name="mlp",
            infer_func=instances,  # one Triton model instance per function
            inputs=[Tensor(name="x", dtype=np.float32, shape=(64,))],
            outputs=[Tensor(name="logits", dtype=np.float32, shape=(10,))],
            config=ModelConfig(max_batch_size=64,
                               batcher=DynamicBatcher(max_queue_delay_microseconds=2000)),
            strict=True,
        )
        triton.run()
        url = f"http://127.0.0.1:{ports['http_port']}"
        print(f"Triton serving 'mlp' at {url}: {args.instances} instances, dynamic batching "
              f"up to 64 rows")
        per_client = [args.requests // args.clients + (c < args.requests % args.clients)
                      for c in range(args.clients)]

        def client(c, count):
            rng = np.random.default_rng(c)
            with ModelClient(url, "mlp", init_timeout_s=120) as mc:
                for _ in range(count):
                    if time.monotonic() - start > args.time_limit:
                        failures.append("time limit reached")
                        return
                    rows = rng.integers(0, x_all.shape[0], size=int(rng.integers(1, 9)))
                    t = time.monotonic()
                    got = mc.infer_batch(x=x_all[rows])["logits"]
                    dt = time.monotonic() - t
                    want = want_all[rows]
                    if got.shape != want.shape or not np.all(
                            np.abs(got - want) <= 1e-4 + 1e-4 * np.abs(want)):
                        failures.append(f"client {c}: rows {rows.tolist()} differ: max err "
                                        f"{float(np.max(np.abs(got - want))):.3g}")
                    with lock:
                        latencies.append(dt)

        t0 = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda a: client(*a), enumerate(per_client)))
        wall = time.monotonic() - t0
    # The server has stopped here (the with block).
    lat = np.array(sorted(latencies)) * 1e3
    done = len(latencies)
    formed = sorted(batch_sizes.items())
    rows_served = sum(size * n for size, n in formed)
    print(f"{done} requests from {args.clients} concurrent clients in {wall:.2f} s: "
          f"{done / wall:.0f} requests/s, {rows_served / wall:.0f} rows/s; latency p50 "
          f"{np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms")
    print(f"batches the dynamic batcher formed (rows: count): "
          + ", ".join(f"{s}: {n}" for s, n in formed))
    print(f"answers checked against the PyTorch references: {done - len(failures)} of "
          f"{args.requests} correct")
    for f in failures[:10]:
        print("FAIL:", f)
    ok = not failures and done == args.requests
    print("serve-demo:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
