#!/usr/bin/env python3
"""Exports the widened bench corpus (issue 53): networks of families `make bench` was not tuned on.

    /usr/bin/python3 scripts/gen_wide_models.py OUT_DIR [NAME...]

Needs Debian's python3-torch and python3-torchvision (scripts/debian_torch.sh installs them). Like
scripts/gen_cnn_models.py: random weights (fixed seeds), perturbed BatchNorm statistics, opset 13
(17 where the network needs a newer op), BatchNormalization nodes kept, and PyTorch's result as
the reference every engine is checked against. Each network lands in OUT_DIR/<name>/ with
model.onnx, inputs/*.npy and outputs/*.npy. The files are large, so they live in bench/models_wide/
(ignored by git); CI never needs torch. A network already exported is left as it is.

The torchvision networks cover grouped convs (ResNeXt, RegNet), large-kernel depthwise convs and a
channel LayerNorm spelled permute -> LayerNorm -> permute (ConvNeXt), window attention (Swin),
dense concatenation with pre-activation BN -> ReLU -> conv (DenseNet), inception branches
(GoogLeNet, Inception v3), squeeze-and-excitation (RegNetY, MobileNetV3, MNASNet), segmentation
decoders with bilinear upsampling (LR-ASPP, DeepLabV3) and 11x11 / 5x5 convs (AlexNet). The small
modules below add what torchvision lacks: a UNet with transposed-conv decoders and skip concats,
an FPN text detector head (nearest upsampling, concat, conv_transpose + BN), a CRNN recogniser
(conv stack -> bidirectional LSTM), squeeze-and-excitation in three spellings and a block of
depthwise convs of kernel 5, 7 and 9 (one dilated). scripts/gen_exporter_models.py writes the
networks spelled the way other exporters spell them (onnx's helper API).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm
import torchvision.models.segmentation as tvs

from gen_cnn_models import export_network


def conv_bn_act(cin, cout, k=3, s=1, groups=1, dil=1, act=nn.ReLU):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, dil * (k // 2), dilation=dil, groups=groups,
                                   bias=False),
                         nn.BatchNorm2d(cout), act())


class UNet(nn.Module):
    """A small UNet: two downsamplings, transposed-conv upsampling, skip concatenations."""

    def __init__(self, c=32):
        super().__init__()
        self.e1 = nn.Sequential(conv_bn_act(3, c), conv_bn_act(c, c))
        self.e2 = nn.Sequential(conv_bn_act(c, 2 * c, s=2), conv_bn_act(2 * c, 2 * c))
        self.e3 = nn.Sequential(conv_bn_act(2 * c, 4 * c, s=2), conv_bn_act(4 * c, 4 * c))
        self.u2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2)
        self.d2 = nn.Sequential(conv_bn_act(4 * c, 2 * c), conv_bn_act(2 * c, 2 * c))
        self.u1 = nn.ConvTranspose2d(2 * c, c, 2, 2)
        self.d1 = nn.Sequential(conv_bn_act(2 * c, c), conv_bn_act(c, c))
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        y = self.e3(b)
        y = self.d2(torch.cat([self.u2(y), b], 1))
        y = self.d1(torch.cat([self.u1(y), a], 1))
        return self.head(y)


class FpnDetector(nn.Module):
    """A DB-style text detector: a MobileNetV3-like backbone with hardswish, an FPN neck (nearest
    upsampling, adds, concat of the upsampled levels) and a head of conv -> BN -> ReLU ->
    conv_transpose -> BN -> ReLU -> conv_transpose -> sigmoid."""

    def __init__(self, c=24):
        super().__init__()
        hs = nn.Hardswish
        self.s1 = nn.Sequential(conv_bn_act(3, 16, s=2, act=hs), conv_bn_act(16, c, s=2, act=hs))
        self.s2 = nn.Sequential(conv_bn_act(c, c, groups=c, act=hs), conv_bn_act(c, 2 * c, 1, act=hs),
                                conv_bn_act(2 * c, 2 * c, s=2, groups=2 * c, act=hs))
        self.s3 = nn.Sequential(conv_bn_act(2 * c, 4 * c, 1, act=hs),
                                conv_bn_act(4 * c, 4 * c, s=2, groups=4 * c, act=hs))
        self.s4 = nn.Sequential(conv_bn_act(4 * c, 8 * c, 1, act=hs),
                                conv_bn_act(8 * c, 8 * c, s=2, groups=8 * c, act=hs))
        self.lat = nn.ModuleList([nn.Conv2d(ch, 64, 1) for ch in (c, 2 * c, 4 * c, 8 * c)])
        self.smooth = nn.ModuleList([nn.Conv2d(64, 16, 3, padding=1) for _ in range(4)])
        self.head = nn.Sequential(conv_bn_act(64, 16), nn.ConvTranspose2d(16, 16, 2, 2),
                                  nn.BatchNorm2d(16), nn.ReLU(), nn.ConvTranspose2d(16, 1, 2, 2),
                                  nn.Sigmoid())

    def forward(self, x):
        c1 = self.s1(x)
        c2 = self.s2(c1)
        c3 = self.s3(c2)
        c4 = self.s4(c3)
        p4 = self.lat[3](c4)
        p3 = self.lat[2](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p2 = self.lat[1](c2) + F.interpolate(p3, scale_factor=2.0, mode="nearest")
        p1 = self.lat[0](c1) + F.interpolate(p2, scale_factor=2.0, mode="nearest")
        outs = [self.smooth[0](p1)]
        for i, p in ((1, p2), (2, p3), (3, p4)):
            outs.append(F.interpolate(self.smooth[i](p), scale_factor=float(2 ** i), mode="nearest"))
        return self.head(torch.cat(outs, 1))


class Crnn(nn.Module):
    """A CRNN text recogniser: VGG-style conv stack over a 32x128 line image, the height pooled
    away, a bidirectional LSTM over the 32 columns, a per-column classifier."""

    def __init__(self, classes=37):
        super().__init__()
        self.cnn = nn.Sequential(
            conv_bn_act(3, 32), nn.MaxPool2d(2), conv_bn_act(32, 64), nn.MaxPool2d(2),
            conv_bn_act(64, 128), conv_bn_act(128, 128), nn.MaxPool2d((2, 1)),
            conv_bn_act(128, 256), conv_bn_act(256, 256), nn.MaxPool2d((4, 1)))
        self.rnn = nn.LSTM(256, 128, bidirectional=True)
        self.fc = nn.Linear(256, classes)

    def forward(self, x):
        f = self.cnn(x)  # [1, 256, 1, 32]
        f = f.squeeze(2).permute(2, 0, 1)  # [32, 1, 256]
        y, _ = self.rnn(f)
        return self.fc(y).log_softmax(2)


class SeBlock(nn.Module):
    def __init__(self, c, spelling):
        super().__init__()
        self.spelling = spelling
        r = max(8, c // 4)
        if spelling == "conv":
            self.f1, self.f2 = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)
        else:
            self.f1, self.f2 = nn.Linear(c, r), nn.Linear(r, c)

    def forward(self, x):
        if self.spelling == "conv":  # torchvision's: pool -> 1x1 conv -> ReLU -> 1x1 conv -> sigmoid
            s = torch.sigmoid(self.f2(F.relu(self.f1(F.adaptive_avg_pool2d(x, 1)))))
            return x * s
        if self.spelling == "linear":  # mean -> Linear -> SiLU -> Linear -> hardsigmoid
            s = F.hardsigmoid(self.f2(F.silu(self.f1(x.mean((2, 3))))))
            return x * s[:, :, None, None]
        # "flat": reshape-based, as Keras-derived ports spell it
        n, c = x.shape[0], x.shape[1]
        s = torch.sigmoid(self.f2(F.relu(self.f1(x.reshape(n, c, -1).mean(-1)))))
        return x * s.reshape(n, c, 1, 1)


class SeNet(nn.Module):
    """A small residual network whose stages use the three SE spellings above."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn_act(3, 32, s=2)
        layers, cin = [], 32
        for cout, spelling in ((64, "conv"), (128, "linear"), (256, "flat")):
            layers += [conv_bn_act(cin, cout, s=2), conv_bn_act(cout, cout, groups=cout),
                       SeBlock(cout, spelling), conv_bn_act(cout, cout, 1)]
            cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(256, 100)

    def forward(self, x):
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


class LargeKernelDw(nn.Module):
    """Depthwise convs of kernel 5, 7 (dilation 2) and 9 between pointwise convs."""

    def __init__(self, c=96):
        super().__init__()
        self.stem = conv_bn_act(3, c, 4, 4)
        self.blocks = nn.Sequential(
            conv_bn_act(c, c, 5, groups=c), conv_bn_act(c, c, 1),
            conv_bn_act(c, c, 7, groups=c, dil=2), conv_bn_act(c, 2 * c, 1),
            conv_bn_act(2 * c, 2 * c, 9, s=2, groups=2 * c), conv_bn_act(2 * c, 2 * c, 1))
        self.fc = nn.Linear(2 * c, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def seg_head(m):
    class Out(nn.Module):  # the dict output of torchvision's segmentation models as one tensor
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]
    return Out()


# name -> (constructor, input shape, opset)
NETWORKS = {
    "densenet121": (lambda: tvm.densenet121(), (1, 3, 224, 224), 13),
    "googlenet": (lambda: tvm.googlenet(aux_logits=False, init_weights=True), (1, 3, 224, 224), 13),
    "inception_v3": (lambda: tvm.inception_v3(aux_logits=False, init_weights=True), (1, 3, 299, 299), 13),
    "resnext50_32x4d": (lambda: tvm.resnext50_32x4d(), (1, 3, 224, 224), 13),
    "regnet_x_400mf": (lambda: tvm.regnet_x_400mf(), (1, 3, 224, 224), 13),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(), (1, 3, 224, 224), 13),
    "convnext_tiny": (lambda: tvm.convnext_tiny(), (1, 3, 224, 224), 13),
    "swin_t": (lambda: tvm.swin_t(), (1, 3, 224, 224), 17),
    "mnasnet1_0": (lambda: tvm.mnasnet1_0(), (1, 3, 224, 224), 13),
    "mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(), (1, 3, 224, 224), 13),
    "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(), (1, 3, 224, 224), 13),
    "alexnet": (lambda: tvm.alexnet(), (1, 3, 224, 224), 13),
    "efficientnet_b1": (lambda: tvm.efficientnet_b1(), (1, 3, 240, 240), 13),
    "lraspp_mobilenet_v3": (lambda: seg_head(tvs.lraspp_mobilenet_v3_large(weights_backbone=None)),
                            (1, 3, 224, 224), 13),
    "deeplabv3_mobilenet_v3": (lambda: seg_head(tvs.deeplabv3_mobilenet_v3_large(
        weights_backbone=None, aux_loss=False)), (1, 3, 224, 224), 13),
    "unet_small": (lambda: UNet(), (1, 3, 128, 128), 13),
    "fpn_text_detector": (lambda: FpnDetector(), (1, 3, 256, 256), 13),
    "crnn_recognizer": (lambda: Crnn(), (1, 3, 32, 128), 13),
    "se_spellings": (lambda: SeNet(), (1, 3, 160, 160), 13),
    "large_kernel_dw": (lambda: LargeKernelDw(), (1, 3, 224, 224), 13),
}


def export(out_root, name):
    ctor, shape, opset = NETWORKS[name]
    export_network(out_root, name, ctor, shape, opset)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    names = sys.argv[2:] or list(NETWORKS)
    unknown = [n for n in names if n not in NETWORKS]
    if unknown:
        sys.exit(f"gen_wide_models.py: unknown network(s) {unknown}; known: {list(NETWORKS)}")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    failed = []
    for n in names:
        try:
            export(sys.argv[1], n)
        except Exception as e:  # noqa: BLE001 - one network that fails to export must not stop the rest
            print(f"{n}: export failed: {e}", file=sys.stderr)
            failed.append(n)
    if failed:
        sys.exit(f"gen_wide_models.py: {len(failed)} network(s) failed to export: {failed}")


if __name__ == "__main__":
    main()
