#!/usr/bin/env python3
"""This file contains the device's own ceilings at each point of `moejit bench layer`: what a kernel
that does no MoE work reaches on the same bytes or the same FLOPs, timed the same way (CUDA-graph
replay of rotating input sets, median), so that a layer's time can be read against what the H200
gives at that size rather than against the 4.48 TB/s of a 4 GiB stream alone.

- read: one Triton kernel that only reads the weights of the experts a batch of B tokens routes
  to (W1 [rows, H] and W2 [H, I] of each, as the layer does; renormalize routing on uniform
  logits, a fresh expert set per input set) and folds them into a checksum. Its time carries the
  DRAM ramp and drain of one kernel; it has no routing before it and no dependent second GEMM.
  Where the floor is the weight bytes (sweep.weight_bound, on uniform routing's E_act). The 4-bit
  shapes' kernel reads their own bytes: half a byte per weight and the scales (sweep.WEIGHT_BYTES).
- dense: the layer's two GEMMs as dense torch.mm calls with M = B·k rows (bf16: [M, H] x [H, rows],
  then [M, I] x [I, H]), the same FLOPs with each weight matrix shared by all M rows: no routing,
  no gather, no per-expert tiles. Where the floor is the FLOPs.
- peak: one dense 8192^3 bf16 torch.mm, the matmul ceiling docs/PERFORMANCE.md quotes, in the same run.
- fp8 (dense_fp8_*): the dense and peak GEMMs again on e4m3 operands with per-tensor scales
  (torch._scaled_mm, bf16 out), the ceiling of `moejit bench layer --quant fp8_*`; left out
  where torch or the device has no fp8 matmul.

It prints one JSON object per (shape, batch) on stdout (and --json FILE), which bench/merge.py
joins with the moejit rows (--ceilings).

Usage: python3 bench/ceilings.py [--shapes a,b] [--batches 1,8] [--json FILE] [--rotate N]
"""
import json
import statistics
import sys

import torch

from sweep import SHAPES, WEIGHT_BYTES, parse_args, replay_us, weight_bound, weight_format, write_json

try:
    import triton
    import triton.language as tl
except ImportError:  # the read ceiling needs Triton; the dense ones do not
    triton = None

SPAN = 8192  # int32 words per program: 32 KiB, the grain of a plain streaming kernel
BLOCK = 2048  # words per load step of a program (8 warps: 8 words = two 16-byte loads per thread)

if triton is not None:

    @triton.jit
    def _read_experts(w1, w2, ids, out, n1, n2, chunks1, chunks, SPAN: tl.constexpr, BLOCK: tl.constexpr):
        # program (slot, c): chunk c of the slot's expert, W1's chunks first, then W2's
        slot = tl.program_id(0)
        c = tl.program_id(1)
        e = tl.load(ids + slot).to(tl.int64)
        if c < chunks1:
            base = w1 + e * n1
            n = n1
            start = c.to(tl.int64) * SPAN
        else:
            base = w2 + e * n2
            n = n2
            start = (c - chunks1).to(tl.int64) * SPAN
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in range(0, SPAN, BLOCK):
            offs = start + i + tl.arange(0, BLOCK)
            acc += tl.load(base + offs, mask=offs < n, other=0)
        tl.store(out + slot.to(tl.int64) * chunks + c, tl.sum(acc, axis=0))


def graph_time(launch, sets):
    """Median µs per input set of a CUDA graph holding launch(i) for every set i."""
    for i in range(sets):  # compile and warm outside the capture
        launch(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(sets):
            launch(i)
    us = replay_us(g.replay, sets)[0]
    del g
    return us


def read_ceiling(w1, w2, E, k, B, sets):
    """The read-only kernel over the experts of `sets` routed batches: (µs per set, bytes per set)."""
    n1 = w1[0].numel() * w1.element_size() // 4  # int32 words of one expert's W1
    n2 = w2[0].numel() * w2.element_size() // 4
    v1, v2 = w1.view(torch.int32), w2.view(torch.int32)
    chunks1, chunks2 = -(-n1 // SPAN), -(-n2 // SPAN)
    chunks = chunks1 + chunks2
    ids = []
    for _ in range(sets):
        logits = torch.rand(B, E, device="cuda") * 4 - 2
        ids.append(torch.unique(torch.topk(logits, k, dim=-1).indices).to(torch.int32))
    outs = [torch.empty(len(s) * chunks, dtype=torch.int32, device="cuda") for s in ids]

    def launch(i):
        _read_experts[(len(ids[i]), chunks)](v1, v2, ids[i], outs[i], n1, n2, chunks1, chunks,
                                             SPAN=SPAN, BLOCK=BLOCK, num_warps=8)

    us = graph_time(launch, sets)
    experts = statistics.mean(len(s) for s in ids)
    return us, experts, experts * 4 * (n1 + n2)


def dense_time(M, H, rows, I):
    """Dense bf16 GEMM1 [M, H] x [H, rows] then GEMM2 [M, I] x [I, H]: µs."""
    x = torch.rand(M, H, device="cuda").to(torch.bfloat16)
    a = torch.rand(M, I, device="cuda").to(torch.bfloat16)
    w1t = torch.rand(rows, H, device="cuda").to(torch.bfloat16).t()
    w2t = torch.rand(H, I, device="cuda").to(torch.bfloat16).t()
    h = torch.empty(M, rows, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(M, H, device="cuda", dtype=torch.bfloat16)

    def launch(_):
        torch.mm(x, w1t, out=h)
        torch.mm(a, w2t, out=y)

    us = graph_time(launch, 1)
    del x, a, w1t, w2t, h, y
    return us


def dense_fp8_time(M, H, rows, I):
    """The dense_time of e4m3 operands with per-tensor scales (torch._scaled_mm, bf16 out): the
    fp8 layers' dense ceiling; None where this torch or device has no fp8 matmul."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    f8 = torch.float8_e4m3fn
    x = torch.rand(M, H, device="cuda").to(f8)
    a = torch.rand(M, I, device="cuda").to(f8)
    w1t = torch.rand(rows, H, device="cuda").to(f8).t()  # column-major, as _scaled_mm wants B
    w2t = torch.rand(H, I, device="cuda").to(f8).t()
    one = torch.ones((), device="cuda")

    def launch(_):
        torch._scaled_mm(x, w1t, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch._scaled_mm(a, w2t, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    try:
        us = graph_time(launch, 1)
    except RuntimeError as e:  # no fp8 matmul on this device
        print(f"ceilings: no fp8 dense ceiling: {e}", file=sys.stderr)
        us = None
    del x, a, w1t, w2t
    return us


def main():
    names, batches, rotate, json_path = parse_args(__doc__.splitlines()[0])
    if triton is None:
        print("ceilings: no triton: the read ceiling is left out", file=sys.stderr)
    dev = torch.cuda.get_device_name()
    rows_out = []
    m = 8192
    peak_us = dense_time(m, m, m, m) / 2.0  # two 8192^3 GEMMs in one graph: one's time
    peak = {"source": "ceiling", "device": dev, "shape": "dense-8192", "batch": 0,
            "dense_us": round(peak_us, 3), "dense_tflops": round(2 * m ** 3 / peak_us / 1e6, 1)}
    fp8_us = dense_fp8_time(m, m, m, m)
    if fp8_us:
        peak.update(dense_fp8_us=round(fp8_us / 2.0, 3), dense_fp8_tflops=round(4 * m ** 3 / fp8_us / 1e6, 1))
    print(json.dumps(peak), flush=True)
    rows_out.append(peak)
    for name in names:
        H, I, E, k, act = SHAPES[name]
        rows = I if act == "relu2" else 2 * I
        torch.manual_seed(4321)
        fmt = weight_format(name)
        per_weight = WEIGHT_BYTES[fmt]
        if fmt == "bf16":
            w1 = torch.rand(E, rows, H, device="cuda", dtype=torch.bfloat16)
            w2 = torch.rand(E, H, I, device="cuda", dtype=torch.bfloat16)
        else:  # an expert's 4-bit bytes, scales included, in whole int32 words
            w1 = torch.randint(0, 256, (E, -(-int(rows * H * per_weight) // 4) * 4), dtype=torch.uint8, device="cuda")
            w2 = torch.randint(0, 256, (E, -(-int(H * I * per_weight) // 4) * 4), dtype=torch.uint8, device="cuda")
        for B in batches:
            sets = rotate if rotate else (4 if B >= 1024 else 8)
            row = {"source": "ceiling", "device": dev, "shape": name, "batch": B, "torch": torch.__version__}
            e_act = E * (1.0 - (1.0 - k / E) ** B)  # uniform routing's expectation
            by_bytes = weight_bound(e_act * (rows + I) * H * per_weight, 2.0 * B * k * (rows + I) * H)
            if triton is not None and by_bytes:
                us, experts, nbytes = read_ceiling(w1, w2, E, k, B, sets)
                row.update(read_us=round(us, 3), read_experts=round(experts, 2),
                           read_tbps=round(nbytes / us / 1e6, 3))
            if not by_bytes:
                us = dense_time(B * k, H, rows, I)
                row.update(dense_us=round(us, 3),
                           dense_tflops=round(2.0 * B * k * (rows + I) * H / us / 1e6, 1))
                us8 = dense_fp8_time(B * k, H, rows, I)  # the fp8 layers' ceiling (--quant fp8_*)
                if us8:
                    row.update(dense_fp8_us=round(us8, 3),
                               dense_fp8_tflops=round(2.0 * B * k * (rows + I) * H / us8 / 1e6, 1))
            print(json.dumps(row), flush=True)
            rows_out.append(row)
            torch.cuda.empty_cache()
        del w1, w2
        torch.cuda.empty_cache()
    if json_path:
        write_json(json_path, rows_out)


if __name__ == "__main__":
    main()
