#!/usr/bin/env python3
"""Exports aicf's test models from PyTorch, with seeded inputs and PyTorch's outputs as references.

Run by hand with Debian's PyTorch (not by CI; CI uses the committed files):
    apt-get install python3-torch python3-torchvision python3-onnx python3-numpy libopenblas0-pthread
    /usr/bin/python3 scripts/gen_models.py            # writes testdata/models/
    /usr/bin/python3 scripts/gen_models.py NAME...    # writes only the named models

Exporting is not bit-reproducible across PyTorch versions, so add a model by exporting only it
(name filter) and leave the committed files of the others as they are.

Each model goes to testdata/models/<name>/: model.onnx, inputs/<input>.npy, outputs/<output>.npy,
and args.txt with the aicfc flags it needs (--dim bindings for the dynamic variants).
The modules mirror what real exporters produce: a GPT-2 block written like Hugging Face's
GPT2Block (Conv1D projections, tanh GELU with pow 3, Where-based causal mask), a BERT layer like
BertLayer (additive padding mask, erf GELU, post-LayerNorm), a pre-LN ViT encoder block like timm's
Block (one fused qkv Linear, reshape + permute + unbind into q, k, v, erf GELU MLP), a LLaMA
decoder block like transformers' LlamaDecoderLayer (RMSNorm, rotary embeddings with rotate_half,
grouped-query attention with repeat_kv, additive causal mask, SiLU-gated MLP), a small CNN (conv,
batch norm, ReLU, pooling, depthwise conv, Gemm), an MLP, and a small shifted-window transformer
(torchvision's SwinTransformer: its attention mask built by slice assignment, which the exporter
writes as ScatterND on constants; torch.roll as Slice + Concat; window partition reshapes).
"""
import math
import os
import shutil
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "models")


class NewGELU(nn.Module):
    # GPT-2's gelu_new: the tanh approximation, written with pow(x, 3) as in transformers.
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):
    # transformers' Conv1D: y = x @ W + b with W [in, out], via addmm on a 2-D view (exports as
    # Reshape -> Gemm -> Reshape, as real GPT-2 exports do).
    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.randn(nf) * 0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, d, heads, max_pos=128):
        super().__init__()
        self.d, self.h = d, heads
        self.c_attn = Conv1D(3 * d, d)
        self.c_proj = Conv1D(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)).view(1, 1, max_pos, max_pos))
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def split_heads(self, x):
        new_shape = x.size()[:-1] + (self.h, self.d // self.h)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql:kl, :kl]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal, w, mask_value)
        w = nn.functional.softmax(w, dim=-1)
        a = torch.matmul(w, v)
        a = a.permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size()[:-2] + (self.d,))
        return self.c_proj(a)


class GPT2Block(nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = GPT2Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = Conv1D(4 * d, d)
        self.act = NewGELU()
        self.c_proj = Conv1D(d, 4 * d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(self.act(self.c_fc(self.ln_2(x))))


class BertLayer(nn.Module):
    def __init__(self, d=256, heads=4, ffn=1024):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.inter = nn.Linear(d, ffn)
        self.out = nn.Linear(ffn, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def heads(self, x):
        return x.view(x.size()[:-1] + (self.h, self.dh)).permute(0, 2, 1, 3)

    def forward(self, hidden, attention_mask):
        ext = attention_mask[:, None, None, :].to(hidden.dtype)
        ext = (1.0 - ext) * -10000.0
        q, k, v = self.heads(self.query(hidden)), self.heads(self.key(hidden)), self.heads(self.value(hidden))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        s = s + ext
        p = self.dropout(nn.functional.softmax(s, dim=-1))
        c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
        c = c.view(c.size()[:-2] + (self.h * self.dh,))
        a = self.ln1(self.dropout(self.attn_out(c)) + hidden)
        i = nn.functional.gelu(self.inter(a))
        return self.ln2(self.dropout(self.out(i)) + a)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 128), nn.Linear(128, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(torch.sigmoid(self.fc2(torch.relu(self.fc1(x)))) * 2.0)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32)
        self.dw, self.bn3 = nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=32), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        x = nn.functional.avg_pool2d(torch.relu(self.bn3(self.dw(x))), 2)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class DynBatchCNN(nn.Module):
    # The conv family over a batch left symbolic: a stem conv + BN + ReLU and a max pool, a
    # ShuffleNetV2 unit as torchvision writes it (chunk, 1x1 -> depthwise 3x3 -> 1x1 branch,
    # concat, channel shuffle through x.size()), a squeeze-and-excitation gate (hard-sigmoid), a
    # stride-2 branch upsampled (nearest) and concatenated with its input as decoders do, an average
    # pool and a classifier.
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(24), nn.ReLU())
        self.branch = nn.Sequential(
            nn.Conv2d(12, 12, 1, bias=False), nn.BatchNorm2d(12), nn.ReLU(),
            nn.Conv2d(12, 12, 3, padding=1, groups=12, bias=False), nn.BatchNorm2d(12),
            nn.Conv2d(12, 12, 1, bias=False), nn.BatchNorm2d(12), nn.ReLU())
        self.se_reduce, self.se_expand = nn.Conv2d(24, 8, 1), nn.Conv2d(8, 24, 1)
        self.down = nn.Sequential(nn.Conv2d(24, 32, 3, stride=2, padding=1), nn.ReLU())
        self.fuse = nn.Conv2d(56, 32, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(self.stem(x), 3, stride=2, padding=1)
        a, b = x.chunk(2, dim=1)
        x = torch.cat((a, self.branch(b)), 1)
        bsz, c, h, w = x.size()
        x = x.view(bsz, 2, c // 2, h, w).transpose(1, 2).contiguous().view(bsz, -1, h, w)
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        x = x * nn.functional.hardsigmoid(self.se_expand(torch.relu(self.se_reduce(s))))
        d = nn.functional.interpolate(self.down(x), scale_factor=2.0, mode="nearest")
        x = nn.functional.avg_pool2d(torch.relu(self.fuse(torch.cat((x, d), 1))), 2)
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class ViTAttention(nn.Module):
    # timm's Attention (non-fused path): one qkv Linear, heads split by reshape + permute, unbind.
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.scale = self.dh ** -0.5
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class ViTBlock(nn.Module):
    # timm's VisionTransformer Block: pre-LN residual attention and erf-GELU MLP, LayerNorm eps 1e-6.
    def __init__(self, d=256, heads=4, mlp=1024):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.attn = ViTAttention(d, heads)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1, self.act, self.fc2 = nn.Linear(d, mlp), nn.GELU(), nn.Linear(mlp, d)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class LlamaRMSNorm(nn.Module):
    # transformers' LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w, with pow(2).mean(-1, keepdim).
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, kv_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, kv_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, kv_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    # transformers' LlamaAttention (eager path): bias-free projections, rotary embeddings from
    # cached cos/sin buffers indexed by position, grouped-query attention via repeat_kv, additive
    # causal mask of finfo.min (a buffer here, so it is part of the graph), fp32 softmax.
    def __init__(self, d, heads, kv_heads, max_pos=128, base=10000.0):
        super().__init__()
        self.d, self.h, self.kvh, self.dh = d, heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.dh, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(heads * self.dh, d, bias=False)
        inv_freq = 1.0 / (base ** (torch.arange(0, self.dh, 2).float() / self.dh))
        freqs = torch.outer(torch.arange(max_pos).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())
        mask = torch.full((max_pos, max_pos), torch.finfo(torch.float32).min)
        cond = torch.arange(max_pos)
        mask.masked_fill_(cond < (cond + 1).view(max_pos, 1), 0)
        self.register_buffer("causal_mask", mask[None, None, :, :])

    def forward(self, x):
        bsz, q_len, _ = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.kvh, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.kvh, self.dh).transpose(1, 2)
        position_ids = torch.arange(q_len).unsqueeze(0).expand(bsz, q_len)
        cos = self.cos_cached[position_ids].unsqueeze(1)  # [bsz, 1, seq, dh]
        sin = self.sin_cached[position_ids].unsqueeze(1)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        k = repeat_kv(k, self.h // self.kvh)
        v = repeat_kv(v, self.h // self.kvh)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
        w = w + self.causal_mask[:, :, :q_len, :q_len]
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(bsz, q_len, self.d)
        return self.o_proj(a)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, d=256, heads=4, kv_heads=2, inter=688):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(d)
        self.self_attn = LlamaAttention(d, heads, kv_heads)
        self.post_attention_layernorm = LlamaRMSNorm(d)
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


def randomize_norms(m):
    # Non-trivial norm parameters (fresh modules have gamma = 1, beta = 0, which the compiler
    # rightly folds away) and running statistics, so a wrong rewrite shows in the numbers.
    for mod in m.modules():
        if isinstance(mod, LlamaRMSNorm):
            with torch.no_grad():
                mod.weight.uniform_(0.5, 1.5)
        if isinstance(mod, nn.LayerNorm):
            with torch.no_grad():
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


ONLY = set()  # model names given on the command line; empty exports all
KNOWN = set()  # every name export() was called with, to reject misspelt filters


def export(name, model, inputs, input_names, output_names, opset, dynamic_axes=None, args="",
           ranges=""):
    KNOWN.add(name)
    if ONLY and name not in ONLY:
        return
    model.eval()
    out_dir = os.path.join(ROOT, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(os.path.join(out_dir, "inputs"))
    os.makedirs(os.path.join(out_dir, "outputs"))
    path = os.path.join(out_dir, "model.onnx")
    with torch.no_grad():
        outputs = model(*inputs)
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        # training=PRESERVE in eval mode keeps BatchNormalization nodes (no exporter-side folding),
        # so aicf's own Conv+BatchNormalization fold is what gets tested.
        torch.onnx.export(model, tuple(inputs), path, opset_version=opset, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    for n, t in zip(input_names, inputs):
        np.save(os.path.join(out_dir, "inputs", n + ".npy"), t.numpy())
    for n, t in zip(output_names, outputs):
        np.save(os.path.join(out_dir, "outputs", n + ".npy"), t.numpy())
    with open(os.path.join(out_dir, "args.txt"), "w") as f:
        f.write(args + "\n")
    if ranges:  # the --dim ranges one folder is compiled for (tests/unit/test_symbolic.cpp)
        with open(os.path.join(out_dir, "ranges.txt"), "w") as f:
            f.write(ranges + "\n")
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name}: opset {opset}, {len(m.graph.node)} nodes, {os.path.getsize(path)} bytes, ops {ops}")


def main():
    ONLY.update(sys.argv[1:])
    torch.manual_seed(0)
    gpt2 = GPT2Block(256, 4)
    torch.manual_seed(1)
    bert = BertLayer(256, 4, 1024)
    torch.manual_seed(2)
    mlp = MLP()
    torch.manual_seed(3)
    cnn = SmallCNN()
    torch.manual_seed(4)
    gpt2_small = GPT2Block(128, 4)
    torch.manual_seed(5)
    bert_small = BertLayer(128, 4, 512)
    torch.manual_seed(6)
    for m in (gpt2, bert, cnn, gpt2_small, bert_small):
        randomize_norms(m)

    g = torch.Generator().manual_seed(100)
    x_gpt = torch.randn(2, 64, 256, generator=g)
    x_bert = torch.randn(2, 64, 256, generator=g)
    mask = torch.ones(2, 64, dtype=torch.int64)
    mask[1, 48:] = 0  # the second sequence is padded
    x_mlp = torch.randn(8, 64, generator=g)
    x_cnn = torch.randn(2, 3, 32, 32, generator=g)
    x_gpt_s = torch.randn(3, 40, 128, generator=g)
    x_bert_s = torch.randn(3, 24, 128, generator=g)
    mask_s = torch.ones(3, 24, dtype=torch.int64)
    mask_s[0, 20:] = 0
    mask_s[2, 10:] = 0

    for opset in (13, 17):
        export(f"gpt2_block_op{opset}", gpt2, [x_gpt], ["x"], ["y"], opset)
        export(f"bert_layer_op{opset}", bert, [x_bert, mask], ["hidden", "attention_mask"], ["out"], opset)
        export(f"mlp_op{opset}", mlp, [x_mlp], ["x"], ["logits"], opset)
        export(f"cnn_op{opset}", cnn, [x_cnn], ["image"], ["logits"], opset)
    export("gpt2_block_dyn_op17", gpt2_small, [x_gpt_s], ["x"], ["y"], 17,
           dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
           args="--dim batch=3 --dim seq=40")
    export("bert_layer_dyn_op13", bert_small, [x_bert_s, mask_s], ["hidden", "attention_mask"], ["out"], 13,
           dynamic_axes={"hidden": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                         "out": {0: "batch", 1: "seq"}},
           args="--dim batch=3 --dim seq=24")
    export("mlp_dyn_op13", mlp, [x_mlp], ["x"], ["logits"], 13,
           dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, args="--shape x=8x64")

    # Added later: own seeds and input generator, so the models above are unaffected.
    torch.manual_seed(7)
    vit = ViTBlock(256, 4, 1024)
    torch.manual_seed(8)
    llama = LlamaDecoderLayer(256, 4, 2, 688)
    torch.manual_seed(9)
    for m in (vit, llama):
        randomize_norms(m)
    g2 = torch.Generator().manual_seed(101)
    x_vit = torch.randn(2, 64, 256, generator=g2)
    x_llama = torch.randn(2, 64, 256, generator=g2)
    export("vit_block_op17", vit, [x_vit], ["x"], ["y"], 17)
    export("llama_block_op17", llama, [x_llama], ["x"], ["y"], 17)
    # The small CNN with its image's H and W both named "?" (as Paddle exports them: unknown, not
    # one shared dim); --shape binds them by position.
    export("cnn_anon_dims_op13", cnn, [x_cnn], ["image"], ["logits"], 13,
           dynamic_axes={"image": {2: "?", 3: "?"}}, args="--shape image=2x3x32x32")
    # A two-stage Swin (torchvision's SwinTransformer, the swin_t architecture scaled down: embed
    # dim 24, depths [2, 2], heads [1, 2], swin_t's 7 x 7 windows) on a 56 x 56 image, random
    # weights. The first stage (14 x 14 tokens) shifts its second block's windows, its attention
    # mask built by ScatterND; the second (7 x 7, one window) does not shift.
    from torchvision.models.swin_transformer import SwinTransformer
    torch.manual_seed(10)
    swin = SwinTransformer(patch_size=[4, 4], embed_dim=24, depths=[2, 2], num_heads=[1, 2],
                           window_size=[7, 7], stochastic_depth_prob=0.0, num_classes=10)
    torch.manual_seed(11)
    randomize_norms(swin)
    # torchvision's init (std 0.02 Linear weights and relative position biases) leaves logits of
    # ~0.01 and attention close to uniform; unit-scale weights and biases make every score, and
    # so the -100 mask entries, matter in the outputs.
    with torch.no_grad():
        for mod in swin.modules():
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, mod.in_features ** -0.5)
                if mod.bias is not None:
                    mod.bias.uniform_(-0.1, 0.1)
            if hasattr(mod, "relative_position_bias_table"):
                mod.relative_position_bias_table.normal_(0.0, 1.0)
    x_swin = torch.randn(1, 3, 56, 56, generator=torch.Generator().manual_seed(102))
    export("swin_tiny_op17", swin, [x_swin], ["image"], ["logits"], 17)
    # A batch range through the conv family: one folder for batches 1..16.
    torch.manual_seed(12)
    dyn_cnn = DynBatchCNN()
    torch.manual_seed(13)
    randomize_norms(dyn_cnn)
    x_dyn_cnn = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(103))
    export("cnn_dyn_op17", dyn_cnn, [x_dyn_cnn], ["image"], ["logits"], 17,
           dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
           args="--shape image=3x3x32x32", ranges="--dim batch=1..16@4")
    unknown = ONLY - KNOWN
    if unknown:
        print(f"unknown model names: {sorted(unknown)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
