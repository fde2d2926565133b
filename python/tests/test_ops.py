"""The operator without a GPU: its schema, opcheck on the fake implementation (meta tensors),
FakeTensor tracing, and argument checks whose errors name the argument."""
import pytest
import torch
from helpers import make_inputs, op_args

import moejit

ARGS = ("SymInt topk=0, SymInt num_experts=0, SymInt expert_offset=0, Tensor? b1=None, "
        "Tensor? b2=None, Tensor? w1_scale=None, Tensor? w2_scale=None, Tensor? w1_zero=None, "
        "Tensor? w2_zero=None, Tensor? topk_ids=None, Tensor? topk_weights=None, "
        "Tensor? routing_bias=None, Tensor? act_param0=None, Tensor? act_param1=None, "
        "Tensor? act_param2=None, Tensor? x_scale=None) -> Tensor")
SCHEMA = ("moejit::fused_moe(str spec, Tensor x, Tensor w1, Tensor w2, Tensor? router_logits, "
          + ARGS)
SCHEMA_WORKSPACE = ("moejit::fused_moe_workspace(str spec, Tensor x, Tensor w1, Tensor w2, "
                    "Tensor? router_logits, Tensor(a5!) workspace, " + ARGS)

SPECS = [
    "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),w1_layout=interleaved,bias=both",
    "backend=auto,quant=fp16,act=relu2,routing=softmax_topk",
    "backend=simt,quant=bf16,routing=precomputed,act=geglu,bias=b2",
    "backend=simt,quant=fp8_tensor,fp8_act=static,act=silu",
    "backend=simt,quant=fp8_block,act=swiglu",
    "backend=simt,quant=w4a16,group=64,zero_point=1,act=situ(clamp_limit=3)",
    "backend=simt,quant=mxfp4,act=swiglu_step,logits=bf16,routing=sigmoid_renorm",
    "backend=simt,quant=bf16,routing=deepseek_v3,n_group=4,topk_group=2,routed_scaling=2.5",
]


def test_schema():
    for op, want in ((torch.ops.moejit.fused_moe, SCHEMA),
                     (torch.ops.moejit.fused_moe_workspace, SCHEMA_WORKSPACE)):
        assert str(op.default._schema).replace("SymInt", "int") == want.replace("SymInt", "int")


@pytest.mark.parametrize("spec", SPECS)
def test_opcheck_fake_implementation(spec):
    kw = make_inputs(spec, T=3, H=256, I=256, E=8, k=2, device="meta", act_params=True)
    torch.library.opcheck(*op_args(spec, kw))
    kw["workspace"] = torch.empty(1 << 20, dtype=torch.uint8, device="meta")
    torch.library.opcheck(*op_args(spec, kw))


@pytest.mark.parametrize("spec", SPECS[:3])
def test_fake_tensor_shape_and_dtype(spec):
    from torch._subclasses.fake_tensor import FakeTensorMode
    kw = make_inputs(spec, T=7, H=128, I=64, E=8, k=2)
    with FakeTensorMode() as mode:
        fkw = {n: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for n, v in kw.items()}
        out = moejit.fused_moe(spec, **fkw)
    assert out.shape == (7, 128) and out.dtype == moejit.ops._layer_format(spec)["dtype"]


def call(spec, **changes):
    kw = make_inputs(spec, T=4, H=128, I=128, E=8, k=2)
    kw.update(changes)
    return moejit.fused_moe(spec, **kw)


BF16 = "backend=simt,quant=bf16,act=swiglu,bias=both"


@pytest.mark.parametrize("changes,message", [
    (dict(w1=torch.zeros(8, 256, 128, dtype=torch.float16)),
     "w1: expected dtype torch.bfloat16 for quant=bf16, got torch.float16"),
    (dict(w1=torch.zeros(8, 128, 128, dtype=torch.bfloat16)),
     "w1: expected shape [8, 256, 128] [E_local, 2*inter, hidden] (swiglu is gated) for quant=bf16"),
    (dict(x=torch.zeros(4, 128, dtype=torch.float32)), "x: expected dtype torch.bfloat16"),
    (dict(x=torch.zeros(4, 128, 2, dtype=torch.bfloat16)), "x: expected 2 dimensions"),
    (dict(b1=None), "b1: required for bias=both"),
    (dict(b2=torch.zeros(8, 64, dtype=torch.bfloat16)), "b2: expected shape [8, 128] [E_local, hidden]"),
    (dict(router_logits=None), "router_logits: required for routing=renormalize"),
    (dict(router_logits=torch.zeros(4, 8, dtype=torch.bfloat16)),
     "router_logits: expected dtype torch.float32 for logits=fp32"),
    (dict(topk_ids=torch.zeros(4, 2, dtype=torch.int32)), "topk_ids: must be None for routing=renormalize"),
    (dict(w1_scale=torch.ones(8)), "w1_scale: must be None for quant=bf16"),
    (dict(topk=0), "topk: required"),
    (dict(routing_bias=torch.zeros(8)), "routing_bias: must be None for routing=renormalize"),
    (dict(x_scale=torch.ones(1)), "x_scale: must be None"),
    (dict(act_params={"gamma": torch.ones(8)}), "act_params: activation swiglu has no parameter 'gamma'"),
    (dict(act_params={"alpha": torch.ones(4)}), "act_params[alpha]: expected shape [8] [E_local]"),
    (dict(act_params={"alpha": torch.ones(8, dtype=torch.float64)}),
     "act_params[alpha]: expected dtype torch.float32"),
    (dict(w2=torch.zeros(8, 128, 256, dtype=torch.bfloat16)[:, :, :128]), "w2: must be contiguous"),
    (dict(x=torch.zeros(4 * 128 + 1, dtype=torch.bfloat16)[1:].view(4, 128)), "x: data must be 16-byte aligned"),
    (dict(workspace=torch.zeros(64, dtype=torch.int32)), "workspace: expected dtype torch.uint8"),
    (dict(expert_offset=4), "w1: 8 local experts from expert_offset 4 exceed the 8 experts"),
    (dict(w1=torch.zeros(8, 256, 128, dtype=torch.bfloat16, device="meta")),
     "w1: expected device cpu (x's device), got meta"),
])
def test_argument_errors_name_the_argument(changes, message):
    with pytest.raises(moejit.InvalidArgument) as e:
        call(BF16, **changes)
    assert str(e.value).startswith(message), str(e.value)
    assert e.value.status == moejit._abi.ERR_INVALID_ARGUMENT


@pytest.mark.parametrize("spec,changes,message", [
    ("backend=simt,quant=fp8_tensor,act=silu", dict(w1_scale=None), "w1_scale: required for quant=fp8_tensor"),
    ("backend=simt,quant=fp8_block,act=silu", dict(w2_scale=torch.ones(8, 1, 2)),
     "w2_scale: expected shape [8, 1, 1] for quant=fp8_block"),
    ("backend=simt,quant=w4a16,group=32,act=relu", dict(w1=torch.zeros(8, 128, 128, dtype=torch.uint8)),
     "w1: expected shape [8, 128, 64] [E_local, inter, hidden/2] (relu is not gated) for quant=w4a16"),
    ("backend=simt,quant=w4a16,group=32,zero_point=1,act=relu", dict(w1_zero=None),
     "w1_zero: required for quant=w4a16,group=32,zero_point=1"),
    ("backend=simt,quant=w4a16,group=32,act=relu", dict(w2_zero=torch.zeros(1, dtype=torch.uint8)),
     "w2_zero: must be None for quant=w4a16 without zero_point=1"),
    ("backend=simt,quant=mxfp4,act=relu", dict(w1_scale=torch.zeros(8, 128, 4, dtype=torch.float32)),
     "w1_scale: expected dtype torch.uint8"),
    ("backend=simt,quant=fp8_tensor,fp8_act=static,act=relu", dict(x=torch.zeros(4, 128, dtype=torch.bfloat16)),
     "x: expected dtype torch.float8_e4m3fn for quant=fp8_tensor fp8_act=static"),
    ("backend=simt,quant=bf16,routing=precomputed,act=relu", dict(topk_weights=torch.ones(4, 3)),
     "topk_weights: expected shape [4, 2] for routing=precomputed"),
    ("backend=simt,quant=bf16,routing=precomputed,act=relu", dict(router_logits=torch.ones(4, 8)),
     "router_logits: must be None for routing=precomputed"),
    ("backend=simt,quant=bf16,act=gelu", dict(act_params=[torch.ones(8)]),
     "act_params[0]: activation gelu has 0 parameter(s)"),
])
def test_format_errors_name_the_argument(spec, changes, message):
    with pytest.raises(moejit.InvalidArgument) as e:
        call(spec, **changes)
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("spec", SPECS)
def test_valid_cpu_tensors_are_refused_only_for_the_device(spec):
    kw = make_inputs(spec, T=3, H=256, I=256, E=8, k=2, act_params=True)
    with pytest.raises(moejit.InvalidArgument, match=r"^x: moejit runs on CUDA devices, got a tensor on cpu"):
        moejit.fused_moe(spec, **kw)


def test_layer_call_goes_through_the_operator():
    layer = moejit.MoE(quant="bf16", activation=moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0),
                       w1_layout="interleaved", bias="both", topk=2)
    kw = make_inputs(layer.spec, T=2, H=128, I=128, E=8, k=2)
    kw.pop("topk")
    with pytest.raises(moejit.InvalidArgument, match="^x: moejit runs on CUDA"):
        layer(**kw)
    kw["b1"] = kw["b1"].float()
    with pytest.raises(moejit.InvalidArgument, match="^b1: expected dtype torch.bfloat16 for bias=both"):
        layer(**kw)


def test_reference_layouts_agree():
    """The float64 reference reads the three W1 layouts as the same layer."""
    from helpers import reference
    base = "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),bias=both"
    kw = make_inputs(base + ",w1_layout=up_gate", T=3, H=64, I=32, E=4, k=2)
    up, gate = kw["w1"][:, :32], kw["w1"][:, 32:]
    ref = reference(base + ",w1_layout=up_gate", kw)
    for layout, w1, b1 in (
            ("gate_up", torch.cat([gate, up], 1), torch.cat([kw["b1"][:, 32:], kw["b1"][:, :32]], 1)),
            ("interleaved", torch.stack([gate, up], 2).flatten(1, 2),
             torch.stack([kw["b1"][:, 32:], kw["b1"][:, :32]], 2).flatten(1, 2))):
        assert torch.allclose(reference(f"{base},w1_layout={layout}", dict(kw, w1=w1, b1=b1)), ref)
