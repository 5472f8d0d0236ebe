#!/usr/bin/env python3
"""Writes testdata/data_dims/ssdlite_mnv3_160: a torchvision SSDlite detector (MobileNetV3-Large
backbone at width 0.5, 3 classes + background) exported WITH its post-processing (issue 51: "a
torchvision detector with its post-processing compiles and matches ORT on its boxes"), plus two
cases whose numbers of detections differ, with reference outputs from ONNX Runtime.

Two stages, two interpreters (Debian's python3-torch exports, the bench virtual environment has
ONNX Runtime):
    /usr/bin/python3 scripts/gen_detector_model.py               # export + torch outputs, then
                                                                 # runs the stage below itself
    bench/.venv/bin/python scripts/gen_detector_model.py --reference   # ORT references only
The first stage runs the second itself through bench/.venv/bin/python when that exists.

The model: torchvision.models.detection.SSD built as ssdlite320_mobilenet_v3_large builds it
(reduced tail, SSDLite heads, DefaultBoxGenerator with 6 anchors a location) but at width_mult
0.5, size 160x160, num_classes 4, score_thresh 0.35, nms_thresh 0.45, topk_candidates 100,
detections_per_img 100; about 0.96 M parameters (a 4 MB model.onnx). Weights are random (seeded);
the BatchNorm statistics are then calibrated on 16 seeded images (noise and coloured discs), so
activations keep unit scale and the scores depend on the image (with ssdlite's N(0, 0.03) init
and identity BatchNorms every feature is ~0 and all images give the same detections), and the
classification biases get a per-class offset (+0, -0.3, +0.3 for classes 1..3).

ONNX: opset 17, do_constant_folding=True, one input `images` f32[1,3,240,320] (values in [0,1];
the model resizes it to 160x160 and scales the boxes back), outputs `boxes` f32[D,4] (x1,y1,x2,y2
in input pixels), `scores` f32[D], `labels` i64[D], D <= 100 known only at run time. The post-
processing (unrolled per foreground class): Greater(score, 0.35) -> NonZero -> GatherND of scores
and boxes; TopK with k = Min(100, Shape(kept scores)[0]); Concat of the three classes; an If on
"no boxes at all" whose else branch runs the batched NMS (coordinate trick: boxes offset by
label * (max coordinate + 1)) -> NonMaxSuppression -> Gather of the kept indices -> Slice [:100];
Gathers of boxes, scores, labels by them.

Cases (each folder holds images.npy and ORT's boxes.npy, scores.npy, labels.npy; torch/ holds
PyTorch's outputs for comparison):
  case0: uniform noise; every class keeps more than 100 scores except class 2 (TopK cuts them),
    100 detections (the [:100] cuts them);
  case1: a smooth gradient with 6 coloured discs; class 2 keeps none (a TopK with k = 0 on an
    empty tensor), 73 detections.
"""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
NAME = "ssdlite_mnv3_160"
OUT_DIR = os.path.join(REPO, "testdata", "data_dims", NAME)
H, W = 240, 320              # the model's input (fixed)
SIZE = 160                   # SSD's internal size (the transform resizes to it)
NUM_CLASSES = 4              # background + 3
OUTPUTS = ["boxes", "scores", "labels"]
SEED = 51


def build_torch_model():
    """The SSD module (eval mode) and the images the cases use."""
    from functools import partial

    import torch
    from torch import nn
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection import ssd, ssdlite
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator

    torch.manual_seed(SEED)
    norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone = mobilenet_v3_large(weights=None, norm_layer=norm, reduced_tail=True, width_mult=0.5)
    ssdlite._normal_init(backbone)
    backbone = ssdlite._mobilenet_extractor(backbone, 6, norm)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
    channels = det_utils.retrieve_out_channels(backbone, (SIZE, SIZE))
    head = ssdlite.SSDLiteHead(channels, anchors.num_anchors_per_location(), NUM_CLASSES, norm)
    model = ssd.SSD(backbone, anchors, (SIZE, SIZE), NUM_CLASSES, head=head, score_thresh=0.35,
                    nms_thresh=0.45, detections_per_img=100, topk_candidates=100,
                    image_mean=[0.5] * 3, image_std=[0.5] * 3).eval()

    gen = torch.Generator().manual_seed(7)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, H), torch.linspace(0, 1, W), indexing="ij")

    def discs(n):
        """A smooth gradient with n coloured discs, [1,3,H,W] in [0,1]."""
        img = torch.stack([yy * 0.5, xx * 0.5, 0.5 * (1 - yy)])
        for _ in range(n):
            cy, cx, r = torch.rand(3, generator=gen)
            colour = torch.rand(3, 1, 1, generator=gen)
            mask = (((yy - cy) ** 2 + (xx - cx) ** 2) < (0.05 + 0.15 * r) ** 2).float()
            img = img * (1 - mask) + colour * mask
        return img[None]

    calib = torch.cat([torch.rand(4, 3, H, W, generator=gen)] + [discs(k) for k in range(2, 14)])
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    with torch.no_grad():
        # BatchNorm calibration: running stats = the calibration batch's (cumulative average).
        for bn in bns:
            bn.momentum = None
            bn.reset_running_stats()
            bn.train()
        images, _ = model.transform(list(calib))
        model.head(list(model.backbone(images.tensors).values()))
        for bn in bns:
            bn.eval()
        for seq in model.head.classification_head.module_list:
            seq[1].bias.view(-1, NUM_CLASSES).add_(torch.tensor([0.0, 0.0, -0.3, 0.3]))
    cases = [torch.rand(1, 3, H, W, generator=gen), discs(6)]
    return model, cases


def export():
    import torch
    from torch import nn

    model, cases = build_torch_model()

    class Detector(nn.Module):
        """images [1,3,H,W] -> (boxes, scores, labels) of the one image."""

        def __init__(self, ssd_model):
            super().__init__()
            self.ssd = ssd_model

        def forward(self, images):
            det = self.ssd(list(images))[0]
            return det["boxes"], det["scores"], det["labels"]

    det = Detector(model).eval()
    shutil.rmtree(OUT_DIR, ignore_errors=True)
    os.makedirs(OUT_DIR)
    path = os.path.join(OUT_DIR, "model.onnx")
    import warnings
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(det, cases[0], path, opset_version=17, input_names=["images"],
                          output_names=OUTPUTS, do_constant_folding=True)
        for i, x in enumerate(cases):
            cdir = os.path.join(OUT_DIR, f"case{i}")
            os.makedirs(os.path.join(cdir, "torch"))
            np.save(os.path.join(cdir, "images.npy"), x.numpy())
            outs = det(x)
            for name, t in zip(OUTPUTS, outs):
                np.save(os.path.join(cdir, "torch", f"{name}.npy"), t.numpy())
            print(f"  case{i}: torch gives {outs[0].shape[0]} detections, per label "
                  f"{np.bincount(outs[2].numpy(), minlength=NUM_CLASSES).tolist()}")
    print(f"{NAME}: model.onnx ({os.path.getsize(path)} bytes) and torch outputs written to "
          f"{OUT_DIR}")


def reference():
    import onnxruntime as ort

    sess = ort.InferenceSession(os.path.join(OUT_DIR, "model.onnx"),
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    assert names == OUTPUTS, names
    worst_all = 0.0
    for i in range(2):
        cdir = os.path.join(OUT_DIR, f"case{i}")
        outs = sess.run(None, {"images": np.load(os.path.join(cdir, "images.npy"))})
        diffs = []
        for name, o in zip(names, outs):
            np.save(os.path.join(cdir, f"{name}.npy"), o)
            t = np.load(os.path.join(cdir, "torch", f"{name}.npy"))
            if t.shape != o.shape:
                diffs.append(f"{name} shape {t.shape} (torch) vs {o.shape} (ORT)")
                worst_all = float("inf")
                continue
            d = float(np.max(np.abs(t.astype(np.float64) - o))) if o.size else 0.0
            worst_all = max(worst_all, d)
            diffs.append(f"{name} {d:.3g}")
        print(f"  case{i}: ORT gives {outs[0].shape[0]} detections; max |torch - ORT|: "
              + ", ".join(diffs))
    print(f"{NAME}: ONNX Runtime {ort.__version__} references written; worst |torch - ORT| "
          f"{worst_all:.3g}")


def main():
    if "--reference" in sys.argv[1:]:
        reference()
        return
    export()
    try:
        import onnxruntime  # noqa: F401
        reference()
    except ImportError:
        venv = os.path.join(REPO, "bench", ".venv", "bin", "python")
        if not os.path.exists(venv):
            raise SystemExit("no onnxruntime here nor bench/.venv; run this script with "
                             "--reference under a Python that has it")
        subprocess.run([venv, os.path.abspath(__file__), "--reference"], check=True)


if __name__ == "__main__":
    main()
