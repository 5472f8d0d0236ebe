"""PyTorch on the GPU as a peer for bench/gpu_bench.py's `run`: the same network as each case
(the torch module its ONNX file was exported from: scripts/gen_models.py for the bundled
blocks, torchvision for the CNNs; random weights, which do not change the time), on the case's
inputs, captured in a CUDA Graph and replayed, in fp32, TF32 (cuDNN and cuBLAS allowed TF32),
fp16 and bf16 (the module and its float inputs converted; CNNs channels-last), plus eager fp32
with PyTorch's default settings (TF32 convolutions, fp32 matmuls). ONNX Runtime's CUDA provider
(255 MB wheel) and TensorRT do not fit the GPU machine's 64 MiB transfer; PyTorch is on it.
"""
import copy
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def torch_module(case):
    """The torch module case `case` of gpu_bench.py was exported from, or None."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import gen_models as gm  # noqa: E402 - scripts/ is not a package
    blocks = {
        "mlp_op13": lambda: gm.MLP(),
        "mlp_b65536": lambda: gm.MLP(),
        "cnn_op13": lambda: gm.SmallCNN(),
        "gpt2_block_op17": lambda: gm.GPT2Block(256, 4),
        "gpt2_b64_s128": lambda: gm.GPT2Block(128, 4),
        "bert_layer_op17": lambda: gm.BertLayer(256, 4, 1024),
        "bert_b64_s128": lambda: gm.BertLayer(128, 4, 512),
        "vit_block_op17": lambda: gm.ViTBlock(256, 4, 1024),
        "llama_block_op17": lambda: gm.LlamaDecoderLayer(256, 4, 2, 688),
    }
    if case in blocks:
        return blocks[case]()
    import gen_cnn_models as gc  # noqa: E402
    ctor = {**gc.NETWORKS, **gc.ON_REQUEST}.get(case)
    return ctor() if ctor else None


class TorchCase:
    """`fns[mode]` times one call: a CUDA Graph replay plus a synchronisation (modes fp32, tf32,
    fp16, bf16) or an eager call (mode eager); `errors[mode]` says why a mode is missing."""

    def __init__(self, case, feeds, modes=("fp32", "tf32", "fp16", "bf16")):
        import torch
        self.torch = torch
        module = torch_module(case)
        if module is None:
            raise RuntimeError(f"no torch module for {case}")
        self.module = module.eval().cuda()
        self.inputs = [torch.from_numpy(a).cuda() for a in feeds]
        self.conv = any(isinstance(m, torch.nn.Conv2d) for m in self.module.modules())
        self.fns, self.errors, self._keep = {}, {}, []
        for mode in modes:
            try:
                self.fns[mode] = self._graph(mode)
            except Exception as e:  # noqa: BLE001 - the table says why
                # A module that builds tensors on the host in forward (GPT-2's causal mask,
                # LLaMA's rotary tables) cannot be captured: timed eagerly in that precision.
                self.errors[mode] = "eager (no CUDA Graph: " + str(e).splitlines()[0][:90] + ")"
                self.fns[mode] = self._eager(mode)
        self.fns["eager"] = self._eager("default")

    def _converted(self, mode):
        t = self.torch
        dtype = {"fp16": t.float16, "bf16": t.bfloat16}.get(mode, t.float32)
        m = copy.deepcopy(self.module).to(dtype)
        ins = [x.to(dtype) if x.is_floating_point() else x for x in self.inputs]
        if self.conv:
            m = m.to(memory_format=t.channels_last)
            ins = [x.contiguous(memory_format=t.channels_last) if x.dim() == 4 else x for x in ins]
        return m, ins

    def _graph(self, mode):
        t = self.torch
        t.backends.cuda.matmul.allow_tf32 = t.backends.cudnn.allow_tf32 = mode == "tf32"
        m, ins = self._converted(mode)
        with t.no_grad():
            s = t.cuda.Stream()
            s.wait_stream(t.cuda.current_stream())
            with t.cuda.stream(s):
                for _ in range(3):
                    m(*ins)
            t.cuda.current_stream().wait_stream(s)
            g = t.cuda.CUDAGraph()
            with t.cuda.graph(g):
                out = m(*ins)
        self._keep.append((m, ins, out, g))

        def replay():
            g.replay()
            t.cuda.synchronize()
        return replay

    def _eager(self, mode):
        t = self.torch
        if mode == "default":  # PyTorch's defaults: TF32 convolutions, fp32 matmuls
            m, ins = self.module, self.inputs
            flags = (False, True)
        else:
            m, ins = self._converted(mode)
            flags = (mode == "tf32",) * 2

        def call():
            t.backends.cuda.matmul.allow_tf32, t.backends.cudnn.allow_tf32 = flags
            with t.no_grad():
                m(*ins)
            t.cuda.synchronize()
        self._keep.append((m, ins))
        return call
