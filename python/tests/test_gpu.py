"""On a CUDA device: the operator against the float64 reference and against backend=simt, in
CUDA-graph capture and replay, under torch.compile(fullgraph=True), on a side stream, with
opcheck on real tensors, and tensors on the wrong device or of the wrong dtype refused."""
import pytest
import torch
from conftest import HAVE_CUDA
from helpers import make_inputs, op_args, reference

import moejit

pytestmark = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
DEV = "cuda"


def close(out, ref, tol=2e-2):
    """Max error relative to the reference's scale."""
    err = (out.double().cpu() - ref).abs().max().item()
    scale = ref.abs().max().item() + 1e-6
    assert err <= tol * scale, f"max error {err:.3g} against a scale of {scale:.3g}"


def close_elementwise(out, ref, atol, rtol):
    """|out - ref| <= atol * max|ref| + rtol * |ref| for every element."""
    excess = ((out.double().cpu() - ref).abs() - rtol * ref.abs()).max().item()
    scale = ref.abs().max().item() + 1e-6
    assert excess <= atol * scale, f"max error beyond {rtol} of each value {excess:.3g} against a scale of {scale:.3g}"


REF_SPECS = [
    "quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),w1_layout=interleaved,bias=both",
    "quant=fp16,act=swiglu,w1_layout=gate_up,routing=softmax_topk",
    "quant=bf16,act=geglu_tanh,routing=sigmoid_topk,bias=b1",
    "quant=bf16,act=relu2,routing=sigmoid_renorm,logits=bf16",
    "quant=fp16,act=gelu,routing=precomputed,bias=b2",
    "quant=bf16,act=situ(clamp_limit=3),routing=llama4",
    "quant=bf16,act=swiglu_step,routing=deepseek_v3,n_group=4,topk_group=2,routed_scaling=2.5",
    "quant=bf16,act=identity",
    "quant=w4a16,group=64,zero_point=1,act=swiglu",
    "quant=w4a16,group=32,act=silu",
    "quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),w1_layout=interleaved,bias=both",
]


@pytest.mark.parametrize("backend", ["simt", "auto"])
@pytest.mark.parametrize("spec", REF_SPECS)
def test_against_float64_reference(spec, backend):
    spec = f"backend={backend},{spec}"
    k = 1 if "llama4" in spec else 2
    if not moejit.supports(moejit.runtime.with_arch(spec, moejit.runtime.arch_of_device(0))):
        pytest.skip("backend=auto: no backend")
    resolved = moejit.inspect(moejit.runtime.with_arch(spec, moejit.runtime.arch_of_device(0)), compile=False).spec
    # per-expert activation overrides: a tensor-core layer applies them only where its spec asks
    # for them (act_overrides=per_expert); simt's kernels apply them whatever the spec
    if not resolved.startswith("backend=simt,"):
        if "act=situ" in spec:
            kw = make_inputs(spec, T=9, H=256, I=128, E=8, k=k, device=DEV, act_params=True)
            with pytest.raises(moejit.InvalidArgument, match="act_overrides=per_expert"):
                moejit.fused_moe(spec, **kw)
        spec += ",act_overrides=per_expert"
    kw = make_inputs(spec, T=9, H=256, I=128, E=8, k=k, device=DEV, act_params=True)
    out = moejit.fused_moe(spec, **kw)
    assert out.shape == (9, 256) and out.device.type == "cuda"
    close(out, reference(spec, kw))


def test_expert_parallel_slice():
    spec = "backend=simt,quant=bf16,act=swiglu"
    kw = make_inputs(spec, T=6, H=128, I=128, E=8, k=3, E_local=4, device=DEV)
    kw["expert_offset"] = 4
    close(moejit.fused_moe(spec, **kw), reference(spec, kw))


@pytest.mark.parametrize("spec", [
    "quant=bf16,act=swiglu",
    "quant=fp16,act=relu2,routing=softmax_topk",
    "quant=fp8_tensor,act=swiglu",
    "quant=fp8_block,act=silu",
])
@pytest.mark.parametrize("T", [1, 64, 300])
def test_auto_against_simt(spec, T):
    kw = make_inputs(f"backend=simt,{spec}", T=T, H=512, I=256, E=16, k=4, device=DEV)
    simt = moejit.fused_moe(f"backend=simt,{spec}", **kw)
    auto = moejit.fused_moe(f"backend=auto,{spec}", **kw)
    if "fp8_tensor" in spec:
        # one scale for the whole intermediate: where its largest value rounds to the other
        # bf16 neighbour in one backend (T = 300 here), every code may move by an e4m3 step,
        # so the two agree only to the contract's fp8 bar (0.05 of the max, 0.3 of each value)
        close_elementwise(auto, simt.double().cpu(), atol=0.05, rtol=0.3)
    else:
        close(auto, simt.double().cpu(), tol=3e-2)


def test_fp8_near_reference():
    spec = "backend=auto,quant=fp8_tensor,act=swiglu"
    kw = make_inputs(spec, T=16, H=256, I=128, E=8, k=2, device=DEV)
    close(moejit.fused_moe(spec, **kw), reference(spec, kw), tol=0.15)


def test_layer_matches_the_operator_and_reruns_bitwise():
    layer = moejit.MoE(quant="bf16", activation=moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0),
                       routing="renormalize", w1_layout="interleaved", bias="both",
                       backend="auto", topk=4)
    kw = make_inputs(layer.spec, T=33, H=256, I=128, E=16, k=4, device=DEV)
    kw.pop("topk")
    a = layer(**kw)
    b = moejit.fused_moe(layer.spec, topk=4, **kw)
    assert torch.equal(a, b)
    close(a, reference(layer.spec, dict(kw, topk=4)))


def test_cuda_graph_capture_and_replay():
    layer = moejit.MoE(quant="bf16", activation=moejit.SwiGLU(), backend="auto", topk=2)
    kw = make_inputs(layer.spec, T=16, H=256, I=128, E=8, k=2, device=DEV)
    kw.pop("topk")
    layer.warm(DEV)
    eager = layer(**kw)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        layer(**kw)  # the caching allocator's side-stream warm-up, as torch recommends
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = layer(**kw)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
    new = make_inputs(layer.spec, T=16, H=256, I=128, E=8, k=2, device=DEV, seed=7)
    for name in ("x", "router_logits"):
        kw[name].copy_(new[name])
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, layer(**kw))


def test_capture_without_warm_is_a_clear_error():
    spec = "backend=simt,quant=fp16,act=geglu,routing=sigmoid_topk,tile=m16n64k32"
    kw = make_inputs(spec, T=4, H=128, I=128, E=8, k=2, device=DEV)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(moejit.NotWarmed, match=r"warm"):
        with torch.cuda.graph(g):
            moejit.fused_moe(spec, **kw)


def test_torch_compile_fullgraph():
    layer = moejit.MoE(quant="bf16", activation=moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0),
                       w1_layout="interleaved", bias="both", topk=2)
    kw = make_inputs(layer.spec, T=12, H=128, I=128, E=8, k=2, device=DEV)
    kw.pop("topk")

    def f(x, w1, w2, router_logits, b1, b2):
        return layer(x * 1.0, w1, w2, router_logits, b1=b1, b2=b2) + 0

    compiled = torch.compile(f, fullgraph=True)
    args = [kw[n] for n in ("x", "w1", "w2", "router_logits", "b1", "b2")]
    assert torch.equal(compiled(*args), f(*args))
    ws = torch.empty(1 << 22, dtype=torch.uint8, device=DEV)

    def h(x, w1, w2, router_logits, b1, b2, ws):
        return layer(x, w1, w2, router_logits, b1=b1, b2=b2, workspace=ws)

    assert torch.equal(torch.compile(h, fullgraph=True)(*args, ws), f(*args))


def test_side_stream():
    spec = "backend=auto,quant=bf16,act=swiglu"
    kw = make_inputs(spec, T=40, H=256, I=128, E=8, k=2, device=DEV)
    ref = moejit.fused_moe(spec, **kw)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = moejit.fused_moe(spec, **kw)
    s.synchronize()
    assert torch.equal(out, ref)


def test_caller_workspace():
    spec = "backend=simt,quant=bf16,act=swiglu"
    kw = make_inputs(spec, T=8, H=128, I=128, E=8, k=2, device=DEV)
    ref = moejit.fused_moe(spec, **kw)
    ws = torch.empty(1 << 22, dtype=torch.uint8, device=DEV)
    assert torch.equal(moejit.fused_moe(spec, workspace=ws, **kw), ref)
    with pytest.raises(moejit.InvalidArgument, match="^workspace: needs at least"):
        moejit.fused_moe(spec, workspace=ws[:256], **kw)


def test_zero_tokens():
    spec = "backend=simt,quant=bf16,act=swiglu"
    kw = make_inputs(spec, T=0, H=128, I=128, E=8, k=2, device=DEV)
    assert moejit.fused_moe(spec, **kw).shape == (0, 128)


def test_opcheck_on_cuda():
    spec = "backend=auto,quant=bf16,act=swiglu,bias=both"
    kw = make_inputs(spec, T=5, H=128, I=128, E=8, k=2, device=DEV)
    torch.library.opcheck(*op_args(spec, kw))
    kw["workspace"] = torch.empty(1 << 22, dtype=torch.uint8, device=DEV)
    torch.library.opcheck(*op_args(spec, kw))


@pytest.mark.parametrize("name,change,message", [
    ("w1", lambda t: t.cpu(), "w1: expected device cuda:0 (x's device), got cpu"),
    ("router_logits", lambda t: t.cpu(), "router_logits: expected device cuda:0"),
    ("b2", lambda t: t.float(), "b2: expected dtype torch.bfloat16 for bias=both"),
    ("w2", lambda t: t.half(), "w2: expected dtype torch.bfloat16 for quant=bf16, got torch.float16"),
])
def test_wrong_device_or_dtype_names_the_argument(name, change, message):
    spec = "backend=auto,quant=bf16,act=swiglu,bias=both"
    kw = make_inputs(spec, T=4, H=128, I=128, E=8, k=2, device=DEV)
    kw[name] = change(kw[name])
    with pytest.raises(moejit.InvalidArgument) as e:
        moejit.fused_moe(spec, **kw)
    assert str(e.value).startswith(message), str(e.value)


def test_inspect_on_the_device():
    info = moejit.inspect("backend=auto,quant=bf16,act=swiglu", device=DEV)
    assert info.supported and info.loaded and info.kernels
    assert "arch=" + moejit.runtime.arch_of_device(0) in info.spec
