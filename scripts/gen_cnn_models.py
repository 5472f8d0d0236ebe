#!/usr/bin/env python3
"""Exports torchvision classification networks for `make bench` (not for the tests).

    /usr/bin/python3 scripts/gen_cnn_models.py OUT_DIR [NAME...]
    /usr/bin/python3 scripts/gen_cnn_models.py --batch-range OUT_DIR [NAME...]

Needs Debian's python3-torch and python3-torchvision (scripts/debian_torch.sh installs them). Each
network gets random weights (a fixed seed), perturbed BatchNorm statistics and affine parameters
(fresh modules have mean 0 / var 1 / gamma 1 / beta 0, which would let a wrong fold pass), and
is exported at opset 13 for a 1x3x224x224 input, with BatchNormalization nodes kept so aicf's own
conv + batch-norm fold is what runs. It writes OUT_DIR/<name>/model.onnx, inputs/input.npy and
outputs/output.npy (PyTorch's result, the reference the bench checks every engine against).
The files are ~5-50 MB each, so they live in bench/models/ (ignored by git) and CI never needs
torch. A network already exported (its model.onnx exists) is left as it is.

--batch-range (`make bench-dyn`): the batch dim exported as the symbol `batch` (as a user exports
for a dynamic batcher), at batch 4, with args.txt binding it (`--shape input=4x3x224x224`) and
ranges.txt giving the range one folder is compiled for (`--dim batch=1..16@4`).
"""
import inspect
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torchvision.models as tvm

# The networks the bench times: the two the CNN issue names, and four that stress other shapes
# of convolution chains (SE blocks with hardswish, channel shuffle, fire-module concats, SiLU + SE).
NETWORKS = {
    "resnet18": lambda: tvm.resnet18(),
    "mobilenet_v2": lambda: tvm.mobilenet_v2(),
    "mobilenet_v3_small": lambda: tvm.mobilenet_v3_small(),
    "shufflenet_v2_x1_0": lambda: tvm.shufflenet_v2_x1_0(),
    "squeezenet1_1": lambda: tvm.squeezenet1_1(),
    "efficientnet_b0": lambda: tvm.efficientnet_b0(),
}
# Exported only when named: `make bench-footprint`'s 100 MB-class folder (98 MB of weights).
ON_REQUEST = {
    "resnet50": lambda: tvm.resnet50(),
}


def perturb_norms(m, g):
    """Fresh BatchNorm / LayerNorm modules are the identity (mean 0, var 1, gamma 1, beta 0),
    which would let a wrong fold pass: random statistics and affine parameters instead."""
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            n = mod.num_features
            with torch.no_grad():
                mod.running_mean.copy_(torch.rand(n, generator=g) - 0.5)
                mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(n, generator=g) + 0.5)
                mod.bias.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
        elif isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:
            with torch.no_grad():
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) + 0.5)
                mod.bias.copy_((torch.rand(mod.bias.shape, generator=g) - 0.5) * 0.4)


# torch >= 2.9 exports through torch.export by default; the TorchScript exporter (torch 1.13's,
# the one every committed model and bench record used) keeps the spellings comparable.
LEGACY_EXPORTER = ({"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters
                   else {})

BATCH_RANGE = (1, 16, 4)  # --batch-range: min, max, the batch exported and planned for


def export_network(out_root, name, ctor, shape=(1, 3, 224, 224), opset=13, batch_range=False):
    """OUT_ROOT/<name>/model.onnx, inputs/input.npy and outputs/output.npy (PyTorch's result)
    for the network `ctor()` builds; one already exported is kept. batch_range: dim 0 is the
    symbol `batch` (args.txt and ranges.txt as above)."""
    out_dir = os.path.join(out_root, name)
    path = os.path.join(out_dir, "model.onnx")
    if os.path.exists(path):
        print(f"{name}: {path} exists, kept")
        return
    torch.manual_seed(0)
    model = ctor()
    perturb_norms(model, torch.Generator().manual_seed(1))
    model.eval()
    if batch_range:
        shape = (BATCH_RANGE[2],) + tuple(shape[1:])
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    os.makedirs(os.path.join(out_dir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "outputs"), exist_ok=True)
    tmp = path + ".tmp"
    with torch.no_grad():
        y = model(x)
        torch.onnx.export(model, (x,), tmp, opset_version=opset, input_names=["input"],
                          output_names=["output"], training=torch.onnx.TrainingMode.PRESERVE,
                          do_constant_folding=True,
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}
                          if batch_range else None, **LEGACY_EXPORTER)
    onnx.checker.check_model(onnx.load(tmp))
    np.save(os.path.join(out_dir, "inputs", "input.npy"), x.numpy())
    np.save(os.path.join(out_dir, "outputs", "output.npy"), y.numpy())
    if batch_range:
        lo, hi, opt = BATCH_RANGE
        with open(os.path.join(out_dir, "args.txt"), "w") as f:
            f.write("--shape input=" + "x".join(str(d) for d in shape) + "\n")
        with open(os.path.join(out_dir, "ranges.txt"), "w") as f:
            f.write(f"--dim batch={lo}..{hi}@{opt}\n")
    os.replace(tmp, path)  # last, so an interrupted export is redone, never half-used
    print(f"{name}: exported to {path} ({os.path.getsize(path)} bytes)")


def export(out_root, name, batch_range=False):
    export_network(out_root, name, {**NETWORKS, **ON_REQUEST}[name], batch_range=batch_range)


def main():
    argv = sys.argv[1:]
    batch_range = "--batch-range" in argv
    argv = [a for a in argv if a != "--batch-range"]
    if not argv:
        sys.exit(__doc__)
    names = argv[1:] or list(NETWORKS)
    known = list(NETWORKS) + list(ON_REQUEST)
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"gen_cnn_models.py: unknown network(s) {unknown}; known: {known}")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for n in names:
        export(argv[0], n, batch_range)


if __name__ == "__main__":
    main()
