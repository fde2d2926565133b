"""Tensors of a layer in every format, made on any device (meta and CPU for the checks, CUDA
for the GPU tests), and a float64 reference of the layer for the 16-bit and 4-bit formats."""
import torch

import moejit
from moejit.ops import _layer_format


def make_inputs(spec, T=5, H=128, I=128, E=8, k=2, device="cpu", E_local=None, seed=0,
                scale=1.0, act_params=False):
    """Keyword arguments of moejit.fused_moe for spec with random, well-scaled values."""
    fmt = _layer_format(spec)
    g = torch.Generator().manual_seed(seed)
    dt, q = fmt["dtype"], fmt["quant"]
    El = E if E_local is None else E_local
    rows = 2 * I if fmt["gated"] else I

    def randn(*shape, s=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * s)

    def bytes_(*shape):
        return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)

    a = {}
    x = randn(T, H, s=scale)
    if q == "fp8_tensor" and fmt["fp8_act"] == "static":
        a["x_scale"] = torch.tensor([x.abs().max().item() / 448.0])
        a["x"] = (x / a["x_scale"]).to(torch.float8_e4m3fn)
    else:
        a["x"] = x.to(dt)
    if q in ("bf16", "fp16"):
        a["w1"] = randn(El, rows, H, s=H ** -0.5).to(dt)
        a["w2"] = randn(El, H, I, s=I ** -0.5).to(dt)
    elif q in ("fp8_tensor", "fp8_block"):
        a["w1"] = randn(El, rows, H).to(torch.float8_e4m3fn)
        a["w2"] = randn(El, H, I).to(torch.float8_e4m3fn)
        if q == "fp8_tensor":
            a["w1_scale"] = torch.full((El,), H ** -0.5)
            a["w2_scale"] = torch.full((El,), I ** -0.5)
        else:
            a["w1_scale"] = torch.full((El, rows // 128, H // 128), H ** -0.5)
            a["w2_scale"] = torch.full((El, H // 128, I // 128), I ** -0.5)
    elif q == "w4a16":
        gs = fmt["group"]
        a["w1"], a["w2"] = bytes_(El, rows, H // 2), bytes_(El, H, I // 2)
        a["w1_scale"] = (torch.rand(El, rows, H // gs, generator=g) * 0.5 * H ** -0.5).to(dt)
        a["w2_scale"] = (torch.rand(El, H, I // gs, generator=g) * 0.5 * I ** -0.5).to(dt)
        if fmt["zero_point"]:
            a["w1_zero"], a["w2_zero"] = bytes_(El, rows, H // gs // 2), bytes_(El, H, I // gs // 2)
    elif q == "mxfp4":
        a["w1"], a["w2"] = bytes_(El, rows, H // 2), bytes_(El, H, I // 2)
        a["w1_scale"] = torch.randint(120, 124, (El, rows, H // 32), generator=g, dtype=torch.uint8)
        a["w2_scale"] = torch.randint(120, 124, (El, H, I // 32), generator=g, dtype=torch.uint8)
    if fmt["bias"] in ("b1", "both"):
        a["b1"] = randn(El, rows, s=0.1).to(dt)
    if fmt["bias"] in ("b2", "both"):
        a["b2"] = randn(El, H, s=0.1).to(dt)
    if fmt["routing"] == "precomputed":
        ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)]).to(torch.int32)
        a["topk_ids"] = ids
        a["topk_weights"] = torch.rand(T, k, generator=g)
        a["num_experts"] = E
    else:
        a["router_logits"] = randn(T, E).to(fmt["logits"])
        if fmt["routing"] == "deepseek_v3":
            a["routing_bias"] = randn(E, s=0.1)
    if act_params and fmt["act"].params:
        base = [getattr(fmt["act"], p) for p in fmt["act"].params]
        a["act_params"] = {p: torch.tensor([b * (1 + 0.1 * (e % 3)) for e in range(El)],
                                           dtype=torch.float32)
                           for p, b in zip(fmt["act"].params, base) if b is not None}
    a["topk"] = k
    return {n: (v.to(device) if isinstance(v, torch.Tensor) else
                {p: t.to(device) for p, t in v.items()} if isinstance(v, dict) else v)
            for n, v in a.items()}


def op_args(spec, kw):
    """(operator, positional arguments) of the call moejit.fused_moe makes for kw."""
    from moejit.ops import act_param_tensors
    p = act_param_tensors(spec, kw.get("act_params"))
    rest = (kw.get("topk", 0), kw.get("num_experts", 0), kw.get("expert_offset", 0), kw.get("b1"),
            kw.get("b2"), kw.get("w1_scale"), kw.get("w2_scale"), kw.get("w1_zero"),
            kw.get("w2_zero"), kw.get("topk_ids"), kw.get("topk_weights"), kw.get("routing_bias"),
            p[0], p[1], p[2], kw.get("x_scale"))
    head = (spec, kw["x"], kw["w1"], kw["w2"], kw.get("router_logits"))
    if kw.get("workspace") is None:
        return torch.ops.moejit.fused_moe.default, head + rest
    return torch.ops.moejit.fused_moe_workspace.default, head + (kw["workspace"],) + rest


# ---- the float64 reference ------------------------------------------------------------------

def _act(name, params, g, u):
    """The activation on gate g and up u (u is None for an ungated one), float64."""
    sig = torch.sigmoid
    if name == "gelu":
        return 0.5 * g * (1 + torch.erf(g / 2 ** 0.5))
    if name == "relu":
        return g.clamp_min(0)
    if name == "silu":
        return g * sig(g)
    if name == "relu2":
        return g.clamp_min(0) ** 2
    if name == "identity":
        return g
    if name == "swiglu":
        alpha, beta, limit = params
        gg = torch.minimum(g, limit)
        uu = torch.maximum(torch.minimum(u, limit), -limit)
        return gg * sig(alpha * gg) * (uu + beta)
    if name == "geglu":
        return 0.5 * g * (1 + torch.erf(g / 2 ** 0.5)) * u
    if name == "geglu_tanh":
        return 0.5 * g * (1 + torch.tanh(0.7978845608 * (g + 0.044715 * g ** 3))) * u
    if name == "swiglu_step":
        (limit,) = params
        return torch.minimum(g * sig(g), limit) * torch.maximum(torch.minimum(u, limit), -limit)
    if name == "situ":
        gs, ls, c = params
        if c is not None:
            u = torch.maximum(torch.minimum(u, c), -c)
            g = torch.minimum(g, c)
        lin = ls * torch.tanh(u / ls) if ls is not None else u
        return lin * gs * torch.tanh(g / gs) * sig(g)
    raise ValueError(name)


def route(spec, kw, E):
    """(ids [T, k], weights [T, k]) float64, as docs/SEMANTICS.md §4 defines them."""
    fmt = _layer_format(spec)
    f = moejit.runtime.describe(spec)
    k = kw["topk"]
    if fmt["routing"] == "precomputed":
        return kw["topk_ids"].long(), kw["topk_weights"].double()
    lg = kw["router_logits"].double()
    r = fmt["routing"]
    if r == "deepseek_v3":
        ng, tg = int(f["n_group"]), int(f["topk_group"])
        rs = float.fromhex(f["routed_scaling"]) if "0x" in f["routed_scaling"] else float(f["routed_scaling"])
        s = torch.sigmoid(lg) + (kw["routing_bias"].double() if kw.get("routing_bias") is not None else 0)
        T = lg.shape[0]
        grp = s.view(T, ng, E // ng)
        gscore = grp.topk(min(2, E // ng), dim=-1).values.sum(-1)
        keep = gscore.topk(tg, dim=-1).indices
        mask = torch.full_like(gscore, float("-inf")).scatter(1, keep, 0.0)
        s = (grp + mask.unsqueeze(-1)).view(T, E)
        ids = s.topk(k, dim=-1).indices
        w = torch.sigmoid(lg).gather(1, ids)
        return ids, w / w.sum(-1, keepdim=True) * rs
    vals, ids = lg.topk(k, dim=-1)
    if r == "renormalize":
        w = torch.softmax(vals, dim=-1)
    elif r == "softmax_topk":
        w = torch.softmax(lg, dim=-1).gather(1, ids)
    elif r == "sigmoid_topk" or r == "llama4":
        w = torch.sigmoid(vals)
    elif r == "sigmoid_renorm":
        w = torch.sigmoid(vals)
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return ids, w


E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
                    dtype=torch.float64)


def _unpack4(b):
    """u8 [..., K/2] -> int64 [..., K], the even index in the low nibble."""
    b = b.long()
    return torch.stack([b & 15, b >> 4], dim=-1).flatten(-2)


def dequant(spec, kw, which):
    """W1 or W2 as float64 [E_l, rows, K]."""
    fmt = _layer_format(spec)
    q = fmt["quant"]
    w = kw[which].cpu()
    s = kw.get(which + "_scale")
    s = None if s is None else s.cpu()
    if q in ("bf16", "fp16"):
        return w.double()
    if q == "fp8_tensor":
        return w.double() * s.double().view(-1, 1, 1)
    if q == "fp8_block":
        return w.double() * s.double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    if q == "w4a16":
        gs = fmt["group"]
        v = _unpack4(w).double()
        if fmt["zero_point"]:
            z = _unpack4(kw[which + "_zero"].cpu()).double().repeat_interleave(gs, -1)
        else:
            z = 8.0
        return (v - z) * s.double().repeat_interleave(gs, -1)
    if q == "mxfp4":
        v = E2M1[_unpack4(w)]
        return v * torch.pow(2.0, s.double() - 127).repeat_interleave(32, -1)
    raise ValueError(q)


def reference(spec, kw, round_inter=True):
    """The layer in float64 on the CPU: out [T, H] (routing, activation with per-expert
    parameters, layouts, biases, expert parallelism); the intermediate is rounded to the
    dtype once, as every backend stores it."""
    fmt = _layer_format(spec)
    dt = fmt["dtype"]
    x = kw["x"].cpu().double()
    if kw.get("x_scale") is not None:
        x = x * kw["x_scale"].cpu().double()
    w1, w2 = dequant(spec, kw, "w1"), dequant(spec, kw, "w2")
    El, H = w1.shape[0], x.shape[1]
    I = w1.shape[1] // (2 if fmt["gated"] else 1)
    E = kw["router_logits"].shape[1] if kw.get("router_logits") is not None else kw["num_experts"]
    off = kw.get("expert_offset", 0)
    ids, wts = route(spec, {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}, E)
    act = fmt["act"]
    over = kw.get("act_params") or {}
    out = torch.zeros(x.shape[0], H, dtype=torch.float64)
    layout = fmt["w1_layout"]
    idx = torch.arange(I)
    if layout == "up_gate":
        up_rows, gate_rows = idx, I + idx
    elif layout == "gate_up":
        up_rows, gate_rows = I + idx, idx
    else:
        up_rows, gate_rows = 2 * idx + 1, 2 * idx
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j]) - off
            if e < 0 or e >= El:
                continue
            h = w1[e] @ x[t]
            if kw.get("b1") is not None:
                h = h + kw["b1"][e].cpu().double()
            params = []
            for p in act.params:
                v = over[p][e].item() if p in over else getattr(act, p)
                params.append(None if v is None else torch.tensor(v, dtype=torch.float64))
            if fmt["gated"]:
                a = _act(act.name, params, h[gate_rows], h[up_rows])
            else:
                a = _act(act.name, params, h, None)
            if round_inter:
                a = a.to(dt).double()
            y = w2[e] @ a
            if kw.get("b2") is not None:
                y = y + kw["b2"][e].cpu().double()
            out[t] += wts[t, j] * y
    return out
