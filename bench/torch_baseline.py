#!/usr/bin/env python3
"""This file contains the torch baseline of `moejit bench layer`: the same MoE layer (renormalize
routing: top-k of the logits, softmax over the k; argsort by expert; gather; grouped GEMM1 with
torch._grouped_mm; activation; grouped GEMM2; weighted scatter-add) on the same shapes, batches,
input distributions and input-set rotation, timed by CUDA-graph replay (eager with CUDA events if
capture fails). It prints one JSON object per (shape, batch) on stdout (and --json FILE), which
bench/merge.py joins with the moejit rows.

The 4-bit shapes (sweep.FORMATS) run dequantize-then-bf16: every expert's W1 and W2 dequantized
to bf16 by torch operations (w4_weights.py) in each forward, then the same layer; gpt-oss-120b's
with its interleaved W1 and both biases. Their rows also give the dequantization alone
(dequant_us) and the bf16 layer alone on the dequantized weights (bf16_us).

Usage: python3 bench/torch_baseline.py [--shapes a,b] [--batches 1,8] [--json FILE] [--rotate N]
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

import w4_weights
from sweep import SHAPES, parse_args, replay_us, weight_format, write_json


def activation(h, inter, act, interleaved=False):
    if act == "relu2":
        return torch.relu(h).square()
    if interleaved:  # gpt-oss: row 2i the gate, 2i + 1 the up
        u, g = h[:, 1::2], h[:, 0::2]
    else:
        u, g = h[:, :inter], h[:, inter:]  # up FIRST, gate SECOND (the contract's layout)
    if act == "swiglu":
        return F.silu(g) * u
    g = g.clamp(max=7.0)  # gpt-oss: SwiGLU(alpha=1.702, beta=1, limit=7)
    return g * torch.sigmoid(1.702 * g) * (u.clamp(-7.0, 7.0) + 1.0)


def moe_forward(x, logits, w1t, w2t, inter, k, act, b1=None, b2=None, interleaved=False):
    """One layer; w1t [E, H, rows] and w2t [E, I, H] are transposed views of the weights; b1
    [E, rows] and b2 [E, H] the biases, if any."""
    T, H = x.shape
    E = logits.shape[1]
    vals, ids = torch.topk(logits, k, dim=-1)
    weights = torch.softmax(vals, dim=-1)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    token = order // k
    counts = torch.zeros(E, dtype=torch.int32, device=x.device)
    counts.scatter_add_(0, flat.to(torch.int64), torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    xs = x[token]
    h = torch._grouped_mm(xs, w1t, offs=offs)
    expert = flat[order]
    if b1 is not None:
        h = h + b1[expert]
    a = activation(h, inter, act, interleaved)
    y = torch._grouped_mm(a, w2t, offs=offs)
    if b2 is not None:
        y = y + b2[expert]
    y = y.float() * weights.flatten()[order].unsqueeze(1)
    out = torch.zeros(T, H, dtype=torch.float32, device=x.device)
    out.index_add_(0, token, y)
    return out.to(x.dtype)


def layer_of(name, dev):
    """Shape name's weights on dev as (forward(x, logits), dequantized or None, extra): bf16
    weights, or 4-bit ones dequantized in each forward (dequantized() makes the bf16 pair; extra:
    the moe_forward arguments of gpt-oss-120b's layer as it ships)."""
    H, I, E, k, act = SHAPES[name]
    rows = I if act == "relu2" else 2 * I
    torch.manual_seed(1234)
    fmt = weight_format(name)
    if fmt == "bf16":
        w1 = (torch.rand(E, rows, H, device=dev) * 2 - 1).mul_(1 / math.sqrt(H)).to(torch.bfloat16)
        w2 = (torch.rand(E, H, I, device=dev) * 2 - 1).mul_(1 / math.sqrt(I)).to(torch.bfloat16)
        w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)
        return (lambda x, logits: moe_forward(x, logits, w1t, w2t, I, k, act)), None, {}
    q1, s1 = w4_weights.make(fmt, E, rows, H, dev)
    q2, s2 = w4_weights.make(fmt, E, H, I, dev)
    extra = {}
    if name.startswith("gpt-oss"):  # interleaved W1, biases about a tenth of the outputs
        extra = dict(b1=(torch.rand(E, rows, device=dev) * 0.2 - 0.1).to(torch.bfloat16),
                     b2=(torch.rand(E, H, device=dev) * 0.2 - 0.1).to(torch.bfloat16), interleaved=True)

    def dequantized():
        return (w4_weights.dequant(fmt, q1, s1).transpose(1, 2), w4_weights.dequant(fmt, q2, s2).transpose(1, 2))

    def forward(x, logits):
        d1, d2 = dequantized()
        return moe_forward(x, logits, d1, d2, I, k, act, **extra)
    return forward, dequantized, extra


def time_shape(name, batches, rotate, reps_cap=30):
    H, I, E, k, act = SHAPES[name]
    dev = "cuda"
    fmt = weight_format(name)
    forward, dequantized, extra = layer_of(name, dev)
    results = []
    for B in batches:
        sets = rotate if rotate else (4 if B >= 1024 else 8)
        xs = [(torch.rand(B, H, device=dev) * 2 - 1).to(torch.bfloat16) for _ in range(sets)]
        ls = [torch.rand(B, E, device=dev) * 4 - 2 for _ in range(sets)]
        mode = "graph"
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for i in range(sets):  # warm-up outside the capture (allocator, cuBLAS handles)
                    forward(xs[i], ls[i])
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(sets):
                    forward(xs[i], ls[i])
            run = g.replay
        except Exception as e:  # noqa: BLE001 - report and fall back to eager timing
            print(f"torch baseline: {name} B={B}: graph capture failed ({e}); eager timing", file=sys.stderr)
            mode = "eager"

            def run():
                for i in range(sets):
                    forward(xs[i], ls[i])

        med, spread = replay_us(run, sets, reps_cap)
        row = {"source": "torch", "device": torch.cuda.get_device_name(), "shape": name, "batch": B,
               "us": round(med, 3), "spread": round(spread, 4), "mode": mode,
               "torch": torch.__version__}
        if fmt != "bf16":
            row.update(parts(fmt, dequantized, xs, ls, I, k, act, extra, sets))
        print(json.dumps(row), flush=True)
        results.append(row)
        del xs, ls
        if mode == "graph":
            del g
        torch.cuda.empty_cache()
    del forward, dequantized, extra  # the weights, before the next shape's
    torch.cuda.empty_cache()
    return results


def parts(fmt, dequantized, xs, ls, inter, k, act, extra, sets):
    """A 4-bit row's parts, each timed eagerly with CUDA events: the dequantization of every
    expert's weights alone, and the bf16 layer alone on the dequantized weights."""
    dq, _ = replay_us(lambda: [dequantized() for _ in range(sets)], sets, 10)
    d1, d2 = dequantized()
    layer, _ = replay_us(lambda: [moe_forward(xs[i], ls[i], d1, d2, inter, k, act, **extra) for i in range(sets)],
                         sets, 10)
    del d1, d2
    return {"format": fmt, "dequant_us": round(dq, 3), "bf16_us": round(layer, 3)}


def main():
    names, batches, rotate, json_path = parse_args(__doc__.splitlines()[0])
    rows = []
    for n in names:
        rows += time_shape(n, batches, rotate)
    if json_path:
        write_json(json_path, rows)


if __name__ == "__main__":
    main()
