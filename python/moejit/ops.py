"""The torch operator moejit::fused_moe: argument checks that name the argument, a fake
implementation for torch.compile, and the CUDA implementation through moejit_moe_forward."""
import ctypes
import functools
import threading
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor

from . import _abi
from .activations import parse_activation
from .errors import CudaError, InvalidArgument
from .runtime import describe, get_kernel

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
E4M3 = torch.float8_e4m3fn
# 4-bit and e8m0 data travel as bytes; torch's own byte-sized dtypes for them are accepted too.
BYTE_DTYPES = tuple(d for d in (torch.uint8, getattr(torch, "float4_e2m1fn_x2", None),
                                getattr(torch, "float8_e8m0fnu", None)) if d is not None)


@functools.lru_cache(maxsize=1024)
def _layer_format(spec: str):
    """What the tensors of spec must be, from its canonical fields."""
    f = describe(spec)
    act = parse_activation(f["act"])
    return dict(quant=f["quant"], dtype=DTYPES[f["dtype"]], logits=DTYPES[f["logits"]],
                routing=f["routing"], w1_layout=f["w1_layout"], bias=f["bias"],
                group=int(f.get("group", 0)), zero_point=f.get("zero_point") == "1",
                fp8_act=f.get("fp8_act"), gated=act.is_gated, act=act,
                pins={k: int(f[k]) for k in ("hidden", "inter", "experts", "topk")})


def _fail(msg):
    raise InvalidArgument(msg)


def _dtype_name(d):
    return str(d)


class _Checker:
    """Checks one forward's tensors against the spec; every message starts with the argument."""

    def __init__(self, spec, fmt, device, check_alignment):
        self.spec = spec
        self.fmt = fmt
        self.device = device
        self.check_alignment = check_alignment

    def tensor(self, name, t, dtypes, shape, align, why, layout=""):
        if not isinstance(t, Tensor):
            _fail(f"{name}: expected a tensor, got {type(t).__name__}")
        if not isinstance(dtypes, tuple):
            dtypes = (dtypes,)
        if t.dtype not in dtypes:
            want = " or ".join(_dtype_name(d) for d in dtypes)
            _fail(f"{name}: expected dtype {want} for {why}, got {t.dtype}")
        if tuple(t.shape) != tuple(shape):
            _fail(f"{name}: expected shape {list(shape)}{' ' + layout if layout else ''} for {why}, "
                  f"got {list(t.shape)}")
        if t.device != self.device:
            _fail(f"{name}: expected device {self.device} (x's device), got {t.device}")
        if not t.is_contiguous():
            _fail(f"{name}: must be contiguous (row-major), got strides {list(t.stride())}")
        if self.check_alignment and t.numel() and t.data_ptr() % align:
            _fail(f"{name}: data must be {align}-byte aligned, got address {t.data_ptr():#x}")

    def absent(self, name, t, why):
        if t is not None:
            _fail(f"{name}: must be None for {why}")

    def present(self, name, t, why):
        if t is None:
            _fail(f"{name}: required for {why}")


def check_args(spec, x, w1, w2, router_logits, topk, num_experts, expert_offset, b1, b2,
               w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias,
               act_params: Sequence[Optional[Tensor]], x_scale, workspace, check_alignment=True):
    """Checks every argument; returns the shape (T, H, I, E, E_l, k) and the output dtype."""
    fmt = _layer_format(spec)
    q, dt = fmt["quant"], fmt["dtype"]
    qs = f"quant={q}"
    if not isinstance(x, Tensor):
        _fail(f"x: expected a tensor, got {type(x).__name__}")
    c = _Checker(spec, fmt, x.device, check_alignment)
    static_x = q == "fp8_tensor" and fmt["fp8_act"] == "static"
    if x.dim() != 2:
        _fail(f"x: expected 2 dimensions [tokens, hidden], got shape {list(x.shape)}")
    T, H = x.shape
    c.tensor("x", x, E4M3 if static_x else dt, (T, H), 16,
             f"{qs} fp8_act=static" if static_x else f"dtype={_name_of(dt)}")
    for name, w in (("w1", w1), ("w2", w2)):
        if not isinstance(w, Tensor) or w.dim() != 3:
            _fail(f"{name}: expected 3 dimensions [experts, rows, K], got "
                  + (f"shape {list(w.shape)}" if isinstance(w, Tensor) else type(w).__name__))
    packed = q in ("w4a16", "mxfp4")
    E_l = w1.shape[0]
    I = w2.shape[2] * (2 if packed else 1)
    rows = 2 * I if fmt["gated"] else I
    wdt = {"bf16": dt, "fp16": dt, "fp8_tensor": E4M3, "fp8_block": E4M3}.get(q, BYTE_DTYPES)
    kdiv = 2 if packed else 1
    half = "/2" if packed else ""
    c.tensor("w1", w1, wdt, (E_l, rows, H // kdiv), 16, qs,
             f"[E_local, {'2*inter' if fmt['gated'] else 'inter'}, hidden{half}] "
             f"({fmt['act'].name} is {'gated' if fmt['gated'] else 'not gated'})")
    c.tensor("w2", w2, wdt, (E_l, H, I // kdiv), 16, qs, f"[E_local, hidden, inter{half}]")
    # Scales and zero points per format.
    if q in ("bf16", "fp16"):
        for n, t in (("w1_scale", w1_scale), ("w2_scale", w2_scale)):
            c.absent(n, t, qs)
    elif q == "fp8_tensor":
        c.present("w1_scale", w1_scale, qs)
        c.present("w2_scale", w2_scale, qs)
        c.tensor("w1_scale", w1_scale, torch.float32, (E_l,), 4, qs)
        c.tensor("w2_scale", w2_scale, torch.float32, (E_l,), 4, qs)
    elif q == "fp8_block":
        c.present("w1_scale", w1_scale, qs)
        c.present("w2_scale", w2_scale, qs)
        c.tensor("w1_scale", w1_scale, torch.float32, (E_l, rows // 128, H // 128), 4, qs)
        c.tensor("w2_scale", w2_scale, torch.float32, (E_l, H // 128, I // 128), 4, qs)
    elif q == "w4a16":
        g = fmt["group"]
        qs = f"quant=w4a16,group={g}"
        c.present("w1_scale", w1_scale, qs)
        c.present("w2_scale", w2_scale, qs)
        c.tensor("w1_scale", w1_scale, dt, (E_l, rows, H // g), 2, qs)
        c.tensor("w2_scale", w2_scale, dt, (E_l, H, I // g), 2, qs)
    elif q == "mxfp4":
        c.present("w1_scale", w1_scale, qs)
        c.present("w2_scale", w2_scale, qs)
        c.tensor("w1_scale", w1_scale, BYTE_DTYPES, (E_l, rows, H // 32), 1, qs + " (e8m0)")
        c.tensor("w2_scale", w2_scale, BYTE_DTYPES, (E_l, H, I // 32), 1, qs + " (e8m0)")
    if q == "w4a16" and fmt["zero_point"]:
        g = fmt["group"]
        zs = f"quant=w4a16,group={g},zero_point=1"
        c.present("w1_zero", w1_zero, zs)
        c.present("w2_zero", w2_zero, zs)
        c.tensor("w1_zero", w1_zero, torch.uint8, (E_l, rows, H // g // 2), 1, zs)
        c.tensor("w2_zero", w2_zero, torch.uint8, (E_l, H, I // g // 2), 1, zs)
    else:
        why = "quant=w4a16 without zero_point=1" if q == "w4a16" else qs
        c.absent("w1_zero", w1_zero, why)
        c.absent("w2_zero", w2_zero, why)
    if static_x:
        c.present("x_scale", x_scale, f"{qs},fp8_act=static")
        c.tensor("x_scale", x_scale, torch.float32, (1,), 4, f"{qs},fp8_act=static")
    else:
        c.absent("x_scale", x_scale, "a spec other than quant=fp8_tensor,fp8_act=static")
    # Biases.
    bias = fmt["bias"]
    if bias in ("b1", "both"):
        c.present("b1", b1, f"bias={bias}")
        c.tensor("b1", b1, dt, (E_l, rows), 2, f"bias={bias}", "[E_local, rows of w1]")
    else:
        c.absent("b1", b1, f"bias={bias}")
    if bias in ("b2", "both"):
        c.present("b2", b2, f"bias={bias}")
        c.tensor("b2", b2, dt, (E_l, H), 2, f"bias={bias}", "[E_local, hidden]")
    else:
        c.absent("b2", b2, f"bias={bias}")
    # Routing.
    routing = fmt["routing"]
    rs = f"routing={routing}"
    if not isinstance(topk, int) or isinstance(topk, bool):
        _fail(f"topk: expected an int, got {topk!r}")
    if routing == "precomputed":
        c.absent("router_logits", router_logits, rs + " (give topk_ids and topk_weights)")
        c.present("topk_ids", topk_ids, rs)
        c.present("topk_weights", topk_weights, rs)
        if topk_ids.dim() != 2:
            _fail(f"topk_ids: expected 2 dimensions [tokens, topk], got shape {list(topk_ids.shape)}")
        k = topk_ids.shape[1] if topk <= 0 else topk
        E = num_experts if num_experts > 0 else expert_offset + E_l
        c.tensor("topk_ids", topk_ids, torch.int32, (T, k), 4, rs)
        c.tensor("topk_weights", topk_weights, torch.float32, (T, k), 4, rs)
    else:
        c.present("router_logits", router_logits, rs)
        c.absent("topk_ids", topk_ids, rs)
        c.absent("topk_weights", topk_weights, rs)
        if router_logits.dim() != 2:
            _fail(f"router_logits: expected 2 dimensions [tokens, experts], got shape "
                  f"{list(router_logits.shape)}")
        E = router_logits.shape[1]
        if num_experts > 0 and num_experts != E:
            _fail(f"num_experts: {num_experts} differs from router_logits' width {E}")
        k = topk if topk > 0 else fmt["pins"]["topk"]
        if k <= 0:
            _fail("topk: required (experts per token), as an argument or pinned in the spec")
        c.tensor("router_logits", router_logits, fmt["logits"], (T, E), 4 if fmt["logits"] == torch.float32 else 2,
                 f"logits={_logits_name(fmt['logits'])}")
    if routing == "deepseek_v3":
        if routing_bias is not None:
            c.tensor("routing_bias", routing_bias, torch.float32, (E,), 4, rs)
    else:
        c.absent("routing_bias", routing_bias, rs + " (only routing=deepseek_v3 has one)")
    if expert_offset < 0 or expert_offset + E_l > E:
        _fail(f"w1: {E_l} local experts from expert_offset {expert_offset} exceed the {E} experts")
    # Per-expert activation parameters.
    names = fmt["act"].params
    for i, t in enumerate(act_params):
        if t is None:
            continue
        if i >= len(names):
            _fail(f"act_params[{i}]: activation {fmt['act'].name} has "
                  f"{len(names)} parameter(s){': ' + ', '.join(names) if names else ''}")
        c.tensor(f"act_params[{names[i]}]", t, torch.float32, (E_l,), 4,
                 "a per-expert override", "[E_local]")
    if workspace is not None:
        c.tensor("workspace", workspace, torch.uint8, (workspace.numel(),), 256,
                 "the workspace (bytes)")
    return (T, H, I, E, E_l, k), dt


def _name_of(dtype):
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _logits_name(dtype):
    return {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]


# ---- the CUDA driver context -------------------------------------------------------------

_tls = threading.local()
_cuda = None


def _ensure_context(device: int) -> None:
    """Makes device's primary context current on this thread (the one torch uses), so the
    library's launches go where torch's tensors are."""
    global _cuda
    done = getattr(_tls, "devices", None)
    if done is None:
        done = _tls.devices = set()
    if device in done:
        return
    if _cuda is None:
        _cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    cur_dev = ctypes.c_int(-1)
    if _cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value and \
            _cuda.cuCtxGetDevice(ctypes.byref(cur_dev)) == 0 and cur_dev.value == device:
        done.add(device)
        return
    dev = ctypes.c_int()
    r = _cuda.cuDeviceGet(ctypes.byref(dev), device)
    if r == 0:
        r = _cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    if r == 0:
        r = _cuda.cuCtxSetCurrent(ctx)
    if r != 0:
        raise CudaError(f"moejit: cannot make device {device}'s primary context current "
                        f"(CUresult {r})")
    done.add(device)


def _ptr(t: Optional[Tensor]):
    return None if t is None else t.data_ptr()


# ---- the operator --------------------------------------------------------------------------

def _forward(spec, x, w1, w2, router_logits, workspace, topk, num_experts, expert_offset, b1,
             b2, w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias,
             act_param0, act_param1, act_param2, x_scale):
    """Checks, gets the kernel (never compiling during capture) and enqueues the layer."""
    act_params = (act_param0, act_param1, act_param2)
    (T, H, I, E, E_l, k), dt = check_args(
        spec, x, w1, w2, router_logits, topk, num_experts, expert_offset, b1, b2, w1_scale,
        w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias, act_params, x_scale,
        workspace)
    if x.device.type != "cuda":
        _fail(f"x: moejit runs on CUDA devices, got a tensor on {x.device}")
    from ._lib import check, lib
    dev = x.device.index
    out = torch.empty((T, H), dtype=dt, device=x.device)
    with torch.cuda.device(dev):
        capturing = torch.cuda.is_current_stream_capturing()
        kernel = get_kernel(spec, dev, compile=not capturing)
        _ensure_context(dev)
        args = _abi.moejit_moe_args()
        lib().moejit_moe_args_init(ctypes.byref(args))  # struct_size and the defaults
        args.num_tokens, args.hidden, args.inter, args.num_experts, args.topk = T, H, I, E, k
        args.expert_offset = expert_offset
        args.num_local_experts = E_l
        args.x, args.router_logits = _ptr(x), _ptr(router_logits)
        args.topk_ids, args.topk_weights = _ptr(topk_ids), _ptr(topk_weights)
        args.routing_bias = _ptr(routing_bias)
        args.w1, args.w2, args.b1, args.b2 = _ptr(w1), _ptr(w2), _ptr(b1), _ptr(b2)
        args.w1_scale, args.w2_scale = _ptr(w1_scale), _ptr(w2_scale)
        args.w1_zero, args.w2_zero = _ptr(w1_zero), _ptr(w2_zero)
        for i, t in enumerate(act_params):
            args.act_param[i] = _ptr(t)
        args.out, args.x_scale = _ptr(out), _ptr(x_scale)
        need = kernel.workspace_size(args)
        if workspace is None:
            workspace = torch.empty(max(need, 1), dtype=torch.uint8, device=x.device)
        elif workspace.numel() < need:
            _fail(f"workspace: needs at least {need} bytes for this shape, got {workspace.numel()}")
        if T == 0:
            return out
        stream = torch.cuda.current_stream(dev).cuda_stream
        check(lib().moejit_moe_forward(kernel.ptr, ctypes.byref(args),
                                       ctypes.c_void_p(workspace.data_ptr()), workspace.numel(),
                                       ctypes.c_void_p(stream)))
    return out


def _fake(spec, x, w1, w2, router_logits, workspace, topk, num_experts, expert_offset, b1, b2,
          w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias, act_param0,
          act_param1, act_param2, x_scale):
    (T, H, *_), dt = check_args(
        spec, x, w1, w2, router_logits, topk, num_experts, expert_offset, b1, b2, w1_scale,
        w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias,
        (act_param0, act_param1, act_param2), x_scale, workspace, check_alignment=False)
    return x.new_empty((T, H), dtype=dt)


# The common operator is pure (its workspace comes from torch's caching allocator), which is
# what torch.compile and CUDA graphs handle best.
@torch.library.custom_op("moejit::fused_moe", mutates_args=())
def fused_moe_op(spec: str, x: Tensor, w1: Tensor, w2: Tensor, router_logits: Optional[Tensor],
                 topk: int = 0, num_experts: int = 0, expert_offset: int = 0,
                 b1: Optional[Tensor] = None, b2: Optional[Tensor] = None,
                 w1_scale: Optional[Tensor] = None, w2_scale: Optional[Tensor] = None,
                 w1_zero: Optional[Tensor] = None, w2_zero: Optional[Tensor] = None,
                 topk_ids: Optional[Tensor] = None, topk_weights: Optional[Tensor] = None,
                 routing_bias: Optional[Tensor] = None, act_param0: Optional[Tensor] = None,
                 act_param1: Optional[Tensor] = None, act_param2: Optional[Tensor] = None,
                 x_scale: Optional[Tensor] = None) -> Tensor:
    return _forward(spec, x, w1, w2, router_logits, None, topk, num_experts, expert_offset, b1,
                    b2, w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights,
                    routing_bias, act_param0, act_param1, act_param2, x_scale)


# The same with the caller's workspace, which it writes (a required argument: torch releases
# before 2.15 drop trailing defaulted arguments before marking the mutated ones).
@torch.library.custom_op("moejit::fused_moe_workspace", mutates_args=("workspace",))
def fused_moe_workspace_op(spec: str, x: Tensor, w1: Tensor, w2: Tensor,
                           router_logits: Optional[Tensor], workspace: Tensor, topk: int = 0,
                           num_experts: int = 0, expert_offset: int = 0,
                           b1: Optional[Tensor] = None, b2: Optional[Tensor] = None,
                           w1_scale: Optional[Tensor] = None, w2_scale: Optional[Tensor] = None,
                           w1_zero: Optional[Tensor] = None, w2_zero: Optional[Tensor] = None,
                           topk_ids: Optional[Tensor] = None,
                           topk_weights: Optional[Tensor] = None,
                           routing_bias: Optional[Tensor] = None,
                           act_param0: Optional[Tensor] = None,
                           act_param1: Optional[Tensor] = None,
                           act_param2: Optional[Tensor] = None,
                           x_scale: Optional[Tensor] = None) -> Tensor:
    return _forward(spec, x, w1, w2, router_logits, workspace, topk, num_experts, expert_offset,
                    b1, b2, w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights,
                    routing_bias, act_param0, act_param1, act_param2, x_scale)


@fused_moe_op.register_fake
def _fused_moe_fake(spec, x, w1, w2, router_logits, topk=0, num_experts=0, expert_offset=0,
                    b1=None, b2=None, w1_scale=None, w2_scale=None, w1_zero=None, w2_zero=None,
                    topk_ids=None, topk_weights=None, routing_bias=None, act_param0=None,
                    act_param1=None, act_param2=None, x_scale=None):
    return _fake(spec, x, w1, w2, router_logits, None, topk, num_experts, expert_offset, b1, b2,
                 w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias,
                 act_param0, act_param1, act_param2, x_scale)


@fused_moe_workspace_op.register_fake
def _fused_moe_workspace_fake(spec, x, w1, w2, router_logits, workspace, topk=0, num_experts=0,
                              expert_offset=0, b1=None, b2=None, w1_scale=None, w2_scale=None,
                              w1_zero=None, w2_zero=None, topk_ids=None, topk_weights=None,
                              routing_bias=None, act_param0=None, act_param1=None,
                              act_param2=None, x_scale=None):
    return _fake(spec, x, w1, w2, router_logits, workspace, topk, num_experts, expert_offset, b1,
                 b2, w1_scale, w2_scale, w1_zero, w2_zero, topk_ids, topk_weights, routing_bias,
                 act_param0, act_param1, act_param2, x_scale)


def act_param_tensors(spec: str, act_params) -> list:
    """[act_param0, act_param1, act_param2] from None, a sequence in the activation's order,
    or a dict by parameter name."""
    if act_params is None:
        return [None, None, None]
    names = _layer_format(spec)["act"].params
    if isinstance(act_params, dict):
        out = [None, None, None]
        for name, t in act_params.items():
            if name not in names:
                _fail(f"act_params: activation {_layer_format(spec)['act'].name} has no parameter "
                      f"{name!r}; its parameters: {', '.join(names) or 'none'}")
            out[names.index(name)] = t
        return out
    out = list(act_params)
    if len(out) > 3:
        _fail(f"act_params: at most 3 tensors, got {len(out)}")
    return out + [None] * (3 - len(out))


def fused_moe(spec: str, x: Tensor, w1: Tensor, w2: Tensor, router_logits: Optional[Tensor] = None,
              *, topk: int = 0, num_experts: int = 0, expert_offset: int = 0, b1=None, b2=None,
              w1_scale=None, w2_scale=None, w1_zero=None, w2_zero=None, topk_ids=None,
              topk_weights=None, routing_bias=None, act_params=None, x_scale=None,
              workspace=None) -> Tensor:
    """One fused MoE layer: out[T, H] = Σ_k w_k·FFN_k(x) for spec (a moejit spec string;
    without an arch it takes x's device's). act_params: per-expert fp32 [E_local] overrides,
    a dict by parameter name or a sequence in the activation's order."""
    p = act_param_tensors(spec, act_params)
    rest = (topk, num_experts, expert_offset, b1, b2, w1_scale, w2_scale, w1_zero, w2_zero,
            topk_ids, topk_weights, routing_bias, p[0], p[1], p[2], x_scale)
    if workspace is None:
        return torch.ops.moejit.fused_moe(spec, x, w1, w2, router_logits, *rest)
    return torch.ops.moejit.fused_moe_workspace(spec, x, w1, w2, router_logits, workspace, *rest)
