#!/usr/bin/env python3
"""Exports torchvision classification networks for `make bench` (not for the tests).

    /usr/bin/python3 scripts/gen_cnn_models.py OUT_DIR [NAME...]

Needs Debian's python3-torch and python3-torchvision (scripts/bench.sh installs them). Each
network gets random weights (a fixed seed), perturbed BatchNorm statistics and affine parameters
(fresh modules have mean 0 / var 1 / gamma 1 / beta 0, which would let a wrong fold pass), and
is exported at opset 13 for a 1x3x224x224 input, with BatchNormalization nodes kept so aicf's own
conv + batch-norm fold is what runs. It writes OUT_DIR/<name>/model.onnx, inputs/input.npy and
outputs/output.npy (PyTorch's result, the reference the bench checks every engine against).
The files are ~5-50 MB each, so they live in bench/models/ (ignored by git) and CI never needs
torch. A network already exported (its model.onnx exists) is left as it is.
"""
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


def export_network(out_root, name, ctor, shape=(1, 3, 224, 224), opset=13):
    """OUT_ROOT/<name>/model.onnx, inputs/input.npy and outputs/output.npy (PyTorch's result)
    for the network `ctor()` builds; one already exported is kept."""
    out_dir = os.path.join(out_root, name)
    path = os.path.join(out_dir, "model.onnx")
    if os.path.exists(path):
        print(f"{name}: {path} exists, kept")
        return
    torch.manual_seed(0)
    model = ctor()
    perturb_norms(model, torch.Generator().manual_seed(1))
    model.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    os.makedirs(os.path.join(out_dir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "outputs"), exist_ok=True)
    tmp = path + ".tmp"
    with torch.no_grad():
        y = model(x)
        torch.onnx.export(model, (x,), tmp, opset_version=opset, input_names=["input"],
                          output_names=["output"], training=torch.onnx.TrainingMode.PRESERVE,
                          do_constant_folding=True)
    onnx.checker.check_model(onnx.load(tmp))
    np.save(os.path.join(out_dir, "inputs", "input.npy"), x.numpy())
    np.save(os.path.join(out_dir, "outputs", "output.npy"), y.numpy())
    os.replace(tmp, path)  # last, so an interrupted export is redone, never half-used
    print(f"{name}: exported to {path} ({os.path.getsize(path)} bytes)")


def export(out_root, name):
    export_network(out_root, name, {**NETWORKS, **ON_REQUEST}[name])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    names = sys.argv[2:] or list(NETWORKS)
    known = list(NETWORKS) + list(ON_REQUEST)
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"gen_cnn_models.py: unknown network(s) {unknown}; known: {known}")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for n in names:
        export(sys.argv[1], n)


if __name__ == "__main__":
    main()
