#!/usr/bin/python3
"""Generates testdata/recipes/: small models whose memory-property certificate fails, so the
lowering takes its family's generic recipe and names the failed condition (issue 16; golden
testdata/ir/cli/recipe_selection.mcir). Each folder holds model.onnx, inputs/*.npy and the
numpy reference outputs/*.npy that aicf-run --reference checks.

Run by hand with Debian's python3-onnx and commit the output:
    /usr/bin/python3 scripts/gen_recipe_models.py
"""
import os

import numpy as np
from onnx import helper

from onnx_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "recipes")


def save(name, nodes, inputs, outputs, feeds, refs):
    save_case(OUT, name, "gen_recipe_models", nodes, inputs, outputs, feeds, refs)


def main():
    rng = np.random.default_rng(16)
    # Softmax over a non-innermost axis: online_reducible_norm's "reduce axes trailing and
    # contiguous" fails; the generic form walks strided rows.
    x = rng.standard_normal((2, 8, 16)).astype(np.float32) * 3
    e = np.exp(x - x.max(axis=1, keepdims=True))
    y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    save("softmax_axis1", [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
         [("x", x)], [("y", y)], [("x", x)], [("y", y)])
    # Layer norm whose scale and bias are computed (graph inputs, not constants): the
    # certificate's "parameters constant" condition fails.
    x = rng.standard_normal((4, 32)).astype(np.float32)
    g = rng.standard_normal((32,)).astype(np.float32)
    b = rng.standard_normal((32,)).astype(np.float32)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = ((x - mean) / np.sqrt(var + 1e-5) * g + b).astype(np.float32)
    save("layer_norm_computed_scale",
         [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
         [("x", x), ("g", g), ("b", b)], [("y", y)], [("x", x), ("g", g), ("b", b)], [("y", y)])


if __name__ == "__main__":
    main()
