"""Specs through Python: canonical forms equal the CLI's, the library's validation messages,
support verdicts, inspect and warm (compiling with NVRTC, no GPU needed), cache settings."""
import os

import pytest
from conftest import HAVE_CUDA, cli_inspect

import moejit
from moejit.runtime import make_spec, split_fields, with_arch

SPECS = [
    "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a,w1_layout=interleaved,bias=both",
    "quant=fp16,act=relu2,arch=sm_80",
    "backend=auto,quant=bf16,arch=sm_90a",
    "backend=auto,quant=mxfp4,arch=sm_90a,routing=sigmoid_renorm",
    "quant=w4a16,group=64,zero_point=1,arch=sm_89,act=situ(clamp_limit=3)",
    "quant=bf16,arch=sm_80,routing=deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5",
    '{"backend":"simt","quant":"fp8_tensor","fp8_act":"static","arch":"sm_90a","act":{"kind":"swiglu","alpha":"1.702"}}',
]


@pytest.mark.parametrize("spec", SPECS)
def test_canonical_is_the_clis(spec):
    assert moejit.canonical(spec) == cli_inspect(spec)["spec"]


def test_split_and_arch_fill():
    assert split_fields("act=swiglu(alpha=1,beta=2),quant=bf16") == [
        ("act", "swiglu(alpha=1,beta=2)"), ("quant", "bf16")]
    assert with_arch("quant=bf16", "sm_80").endswith("arch=sm_80")
    assert with_arch("quant=bf16,arch=native", "sm_80") == "quant=bf16,arch=sm_80"
    assert with_arch("quant=bf16,arch=sm_90a", "sm_80") == "quant=bf16,arch=sm_90a"
    assert '"arch": "sm_86"' in with_arch('{"quant":"bf16"}', "sm_86")
    assert make_spec("quant=bf16,bias=b1", bias="both", act=moejit.GeGLU()) == \
        "quant=bf16,bias=both,act=geglu"


@pytest.mark.parametrize("spec,field", [
    ("quant=bf17,arch=sm_90a", "quant"),
    ("quant=bf16,arch=sm_91", "arch"),
    ("quant=bf16,arch=sm_90a,routing=llama5", "routing"),
    ("quant=bf16,arch=sm_90a,colour=blue", "colour"),
    ("quant=bf16,arch=sm_90a,act=swiglu(limit=-1)", "limit"),
    ("quant=bf16,quant=fp16,arch=sm_90a", "quant"),
])
def test_invalid_specs_name_the_field(spec, field):
    with pytest.raises(moejit.InvalidArgument) as e:
        moejit.canonical(spec)
    assert field in str(e.value) and e.value.status == 1


def test_supports():
    assert moejit.supports(quant="fp8_block", backend="simt", arch="sm_90a")
    assert not moejit.supports("backend=mma,quant=fp8_block,arch=sm_90a")
    reason = moejit.support_reason(quant="fp8_block", backend="mma", arch="sm_90a")
    assert "fp8_block" in reason
    with pytest.raises(moejit.InvalidArgument):
        moejit.supports(quant="nope", arch="sm_90a")


def test_backend_auto_resolves_like_the_cli():
    spec = "backend=auto,quant=bf16,arch=sm_90a,w1_layout=interleaved"
    assert moejit.canonical(spec) == cli_inspect(spec)["spec"]
    assert dict(split_fields(moejit.canonical(spec)))["backend"] == "wgmma"
    spec = "backend=auto,quant=mxfp4,arch=sm_90a,w1_layout=interleaved,bias=both"  # gpt-oss's layer
    assert moejit.canonical(spec) == cli_inspect(spec)["spec"]
    assert dict(split_fields(moejit.canonical(spec)))["backend"] == "wgmma"
    spec = "backend=auto,quant=fp8_block,arch=sm_90a,bias=both"
    assert moejit.canonical(spec) == cli_inspect(spec)["spec"]
    assert dict(split_fields(moejit.canonical(spec)))["backend"] == "simt"  # fp8 tensor cores: no biases


def test_moe_layer_validates_at_construction():
    layer = moejit.MoE(quant="bf16", activation=moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0),
                       routing="renormalize", w1_layout="interleaved", bias="both",
                       backend="auto", topk=4)
    assert layer.canonical.__self__ is layer
    assert layer.fields["bias"] == "both" and layer.fields["w1_layout"] == "interleaved"
    assert moejit.canonical(with_arch(layer.spec, "sm_90a")) == cli_inspect(
        with_arch(layer.spec, "sm_90a"))["spec"]
    with pytest.raises(moejit.InvalidArgument, match="bias"):
        moejit.MoE(bias="b3")
    with pytest.raises(moejit.InvalidArgument, match="topk"):
        moejit.MoE(topk=0)


def test_inspect_without_compile():
    r = moejit.inspect("backend=mma,quant=fp8_block,arch=sm_90a", compile=False)
    assert not r.supported and "fp8_block" in r.reason
    r = moejit.inspect("quant=bf16,arch=sm_90a", compile=False)
    assert r.supported and r.key is None
    assert r.spec == cli_inspect("quant=bf16,arch=sm_90a")["spec"]


def test_warm_and_inspect_compile(tmp_path):
    specs = ["backend=simt,quant=bf16,act=relu2,arch=sm_80",
             "backend=simt,quant=fp16,act=geglu,arch=sm_80"]
    results = moejit.warm(specs, jobs=2)
    assert [r.ok for r in results] == [True, True], [r.message for r in results]
    for spec, r in zip(specs, results):
        assert r.spec == moejit.canonical(spec)
        assert len(r.kernel.key) == 64
        assert r.kernel.key == cli_inspect(spec)["key"]
        if not HAVE_CUDA:
            assert not r.kernel.loaded  # compiled, not loaded: no GPU here
    info = moejit.inspect(specs[0])
    assert info.supported and info.key == results[0].kernel.key
    assert info.kernels and all(k.registers > 0 and k.name for k in info.kernels)
    # A second warm finds them in memory: nothing is compiled again.
    assert not any(r.compiled for r in moejit.warm(specs))


def test_warm_reports_every_failure():
    with pytest.raises(moejit.Unsupported) as e:
        moejit.warm(["backend=simt,quant=bf16,act=relu,arch=sm_80",
                     "backend=wgmma,quant=bf16,arch=sm_80"])
    results = e.value.results
    assert results[0].ok and not results[1].ok and "sm_80" in results[1].message


def test_configure_cache_dir(tmp_path):
    old = moejit.settings()
    try:
        moejit.configure(cache_dir=str(tmp_path / "cache"))
        r = moejit.warm(["backend=simt,quant=bf16,act=silu,arch=sm_80"])[0]
        assert r.ok and r.compiled
        assert any(os.scandir(tmp_path / "cache"))
        moejit.configure(cache_dir=str(tmp_path / "cache"))  # a new context: the disk cache hits
        r = moejit.warm(["backend=simt,quant=bf16,act=silu,arch=sm_80"])[0]
        assert r.ok and not r.compiled
        with pytest.raises(moejit.InvalidArgument, match="cache_mode"):
            moejit.configure(cache_mode="sometimes")
    finally:
        moejit.configure(**vars(old))
