"""This file contains what the bench scripts (torch_baseline.py, ceilings.py, merge.py) share: the
model shapes of docs/PERFORMANCE.md, the floor's two rates and which of them binds, the device
scripts' one command line (--shapes, --batches, --rotate, --json), their timing of a replayed
callable, and the JSON-lines output that merge.py reads. torch is imported only by the timing,
so the rest is tested on the CPU (tests/check_bench_scripts.py)."""
import argparse
import json
import statistics

# name: (H, I per expert, E, k, activation)
SHAPES = {
    "mixtral-8x7b": (4096, 14336, 8, 2, "swiglu"),
    "qwen3-30b-a3b": (2048, 768, 128, 8, "swiglu"),
    "qwen3-235b-a22b": (4096, 1536, 128, 8, "swiglu"),
    "deepseek-v3": (7168, 2048, 256, 8, "swiglu"),
    "nemotron": (2688, 1856, 128, 6, "relu2"),
    "gpt-oss-bf16": (2880, 2880, 128, 4, "swiglu_oss"),
    "kimi-k2": (7168, 2048, 384, 8, "swiglu"),
    # 4-bit weights (FORMATS); gpt-oss-120b's layer as it ships: interleaved W1, b1 and b2
    "gpt-oss-120b-mxfp4": (2880, 2880, 128, 4, "swiglu_oss"),
    "qwen3-30b-a3b-w4a16": (2048, 768, 128, 8, "swiglu"),
}
# the 4-bit shapes' weight formats; the others' weights are bf16
FORMATS = {"gpt-oss-120b-mxfp4": "mxfp4", "qwen3-30b-a3b-w4a16": "w4a16"}
# bytes per weight, scales included: mxfp4 one e8m0 byte per 32, w4a16 (group 128) one bf16 per 128
WEIGHT_BYTES = {"bf16": 2.0, "mxfp4": 0.5 + 1 / 32, "w4a16": 0.5 + 2 / 128}


def weight_format(name):
    """The weight format of shape name: "bf16", "mxfp4" or "w4a16"."""
    return FORMATS.get(name, "bf16")
DEFAULT_SHAPES = "mixtral-8x7b,qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,nemotron"

# the floor's rates: the H200's measured read stream and bf16 matmul (docs/PERFORMANCE.md,
# tools/bench_floor.c)
READ_STREAM_TBPS, MATMUL_TFLOPS = 4.48, 790.0


def weight_bound(weight_bytes, flops):
    """Whether a layer's floor is its weight bytes (else its FLOPs): max(W / stream, F / peak)."""
    return weight_bytes / READ_STREAM_TBPS >= flops / MATMUL_TFLOPS


def parse_args(description, argv=None):
    """The scripts' command line: (shape names, batches, rotate, json path or None). An unknown
    shape or a batch that is not a positive integer is an error naming the allowed values."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--batches", default="1,8,64,512,4096")
    p.add_argument("--rotate", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    names = list(SHAPES) if a.shapes == "all" else a.shapes.split(",")
    for n in names:
        if n not in SHAPES:
            p.error(f"--shapes: unknown shape {n!r}; allowed: {', '.join(SHAPES)}, all")
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        p.error(f"--batches: {a.batches!r} is not a comma-separated list of token counts")
    if any(b < 1 for b in batches):
        p.error(f"--batches: {a.batches!r}: every batch must be at least 1 token")
    if a.rotate < 0:
        p.error(f"--rotate: {a.rotate} must be 0 (the default rotation) or a positive count of input sets")
    return names, batches, a.rotate, a.json


def write_json(path, rows):
    """One JSON object per line, as merge.py reads them."""
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def replay_us(run, sets, reps_cap=30):
    """(median, spread) of µs per input set over timed calls of run(), each covering `sets`
    forwards, after two warm-up calls; as many calls as fit ~250 ms, 5 to reps_cap. spread is
    (slowest - fastest) / median."""
    import torch  # the device's; the rest of this file runs without it

    for _ in range(2):
        run()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    run()
    e1.record()
    e1.synchronize()
    reps = max(5, min(reps_cap, int(250 / max(e0.elapsed_time(e1), 1e-3))))
    times = []
    for _ in range(reps):
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(1000.0 * e0.elapsed_time(e1) / sets)
    med = statistics.median(times)
    return med, (max(times) - min(times)) / med
