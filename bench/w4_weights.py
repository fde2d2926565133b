"""This file contains the 4-bit weights of the bench scripts' 4-bit shapes (sweep.FORMATS), in the
contract's layout (docs/SEMANTICS.md): packed nibbles [E, N, K/2] with the even k in the low
nibble; mxfp4 with one e8m0 scale byte per 32 k, w4a16 (group 128, no zero points: 8) with one
bf16 scale per 128 k; and their dequantization to bf16 by torch operations, which the torch
baseline runs in every forward (dequantize-then-bf16)."""
import math

import torch

GROUP = {"mxfp4": 32, "w4a16": 128}


def make(fmt, E, N, K, device):
    """(packed, scales) of an [E, N, K] matrix whose dequantized values are about 1/sqrt(K)."""
    g = GROUP[fmt]
    packed = torch.randint(0, 256, (E, N, K // 2), dtype=torch.uint8, device=device)
    if fmt == "mxfp4":
        # e2m1 magnitudes average 2.6: 2^(s - 127) near 1 / (2.6 sqrt(K)), within a factor 2
        base = 127 - round(math.log2(2.6 * math.sqrt(K)))
        scales = (base + torch.randint(-1, 2, (E, N, K // g), device=device)).to(torch.uint8)
    else:
        # |q - 8| averages 4: s near 1 / (4 sqrt(K))
        scales = ((torch.rand(E, N, K // g, device=device) * 0.5 + 0.75) / (4 * math.sqrt(K))).to(torch.bfloat16)
    return packed, scales


def nibbles(packed):
    """u8 [..., K/2] -> int16 [..., K], the even k from the low nibble."""
    p = packed.to(torch.int16)
    return torch.stack([p & 15, p >> 4], dim=-1).flatten(-2)


def dequant(fmt, packed, scales):
    """bf16 [E, N, K]: mxfp4 e2m1 · 2^(s − 127), for scale bytes s ≤ 128; w4a16 (q − 8) · s."""
    n = nibbles(packed)
    g = GROUP[fmt]
    if fmt == "mxfp4":
        # e2m1's sign, exponent and mantissa bits placed in bf16's sign, two lowest exponent
        # bits and top mantissa bit read e2m1 · 2^-126 exactly (its subnormal code too); the
        # factor 2^(s − 1), a bf16 value for s ≤ 128, makes that e2m1 · 2^(s − 127)
        bits = ((n & 8) << 12) | ((n & 7) << 6)
        factor = torch.exp2(scales.to(torch.float32) - 1).to(torch.bfloat16)
        return bits.view(torch.bfloat16) * factor.repeat_interleave(g, -1)
    return (n - 8).to(torch.bfloat16) * scales.repeat_interleave(g, -1)
