#!/usr/bin/env python3
"""Silero VAD (issue 20) through aicf against ONNX Runtime: `make silero-vad`.

The model comes from the PyPI package silero-vad (its wheel, downloaded without dependencies
by scripts/silero_vad.sh; not committed: 2.3 MB). Its graph is an If on the sample rate whose
branches hold the 16 kHz and 8 kHz networks (STFT as a conv, four conv blocks, an LSTM decoder
step). aicf compiles one folder per rate with the rate bound at compile time
(`--const sr=16000`, which folds the If to its branch) and the chunk and state shapes bound by
`--shape`. Each folder then runs a stream of chunks (a tone burst in noise), feeding the state
back as a deployment does, next to ONNX Runtime on the same inputs: every chunk's speech
probability and state must agree within 1e-4 + 1e-3 |ref|. Prints the worst errors and the
median latency of one chunk for both.
Usage: silero_vad.py MODEL.onnx BUILD_DIR WORK_DIR
"""
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import AicfEngine, AicfLib  # noqa: E402


def stream(rate, chunk, n):
    t = np.arange(n * chunk) / rate
    rs = np.random.RandomState(rate)
    sig = 0.02 * rs.randn(t.size)
    burst = (t > 0.3 * t[-1]) & (t < 0.7 * t[-1])
    sig[burst] += 0.5 * np.sin(2 * np.pi * 220 * t[burst]) * np.sin(2 * np.pi * 3 * t[burst])
    return sig.astype(np.float32).reshape(n, 1, chunk)


def main():
    model, build, work = sys.argv[1:4]
    alib = AicfLib(os.path.join(build, "libaicf_runtime.so"))
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    failed = False
    print("| rate | chunk | chunks | max err prob | max err state | aicf ms | ORT ms |")
    print("|---|---|---|---|---|---|---|")
    for rate, chunk in ((16000, 512), (8000, 256)):
        out = os.path.join(work, f"silero_vad_{rate}")
        subprocess.run([os.path.join(build, "aicfc"), model, f"--const=sr={rate}",
                        f"--shape=input=1x{chunk}", "--shape=state=2x1x128", "-o", out], check=True)
        chunks = stream(rate, chunk, 40)
        state_a = np.zeros((2, 1, 128), np.float32)
        state_o = state_a.copy()
        err_p = err_s = 0.0
        probs = []
        for x in chunks:
            eng = AicfEngine(alib, out, {"input": x, "state": state_a})
            eng.set_threads(1)
            eng.run()
            got = eng.results()
            ref_p, ref_s = sess.run(None, {"input": x, "state": state_o,
                                           "sr": np.array(rate, dtype=np.int64)})
            for g, r, which in ((got["output"], ref_p, "p"), (got["stateN"], ref_s, "s")):
                e = float(np.max(np.abs(g - r)))
                if not np.all(np.abs(g - r) <= 1e-4 + 1e-3 * np.abs(r)):
                    failed = True
                if which == "p":
                    err_p = max(err_p, e)
                else:
                    err_s = max(err_s, e)
            probs.append(float(ref_p.ravel()[0]))
            state_a, state_o = got["stateN"], ref_s
        # One chunk's latency, interleaved (median of 200 runs each).
        eng = AicfEngine(alib, out, {"input": chunks[0], "state": state_a})
        eng.set_threads(1)
        feed = {"input": chunks[0], "state": state_o, "sr": np.array(rate, dtype=np.int64)}
        ta, to = [], []
        for _ in range(200):
            t0 = time.perf_counter()
            eng.run()
            t1 = time.perf_counter()
            sess.run(None, feed)
            t2 = time.perf_counter()
            ta.append(t1 - t0)
            to.append(t2 - t1)
        print(f"| {rate} | {chunk} | {len(chunks)} | {err_p:.2e} | {err_s:.2e} | "
              f"{1e3 * np.median(ta):.3f} | {1e3 * np.median(to):.3f} |")
        print(f"  speech probability over the stream: min {min(probs):.3f} max {max(probs):.3f}")
    if failed:
        print("silero-vad: MISMATCH against ONNX Runtime")
        return 1
    print("silero-vad: every chunk matches ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
