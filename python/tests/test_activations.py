"""Activation values against the C library: fields, canonical text (the CLI's), hashes and
equality over exact float32 bits, parse round trips, and the library's validation messages."""
import ctypes
import dataclasses
import math
import struct

import pytest
from conftest import cli_inspect

import moejit
from moejit import _abi

f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]  # noqa: E731

VALUES = [
    (moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0), "swiglu(alpha=1.702,beta=1,limit=7)"),
    (moejit.SwiGLU(), "swiglu"),
    (moejit.SwiGLU(beta=-0.0), "swiglu(beta=-0)"),
    (moejit.SiTU(gate_scale=2.5, linear_scale=None, clamp_limit=3.0),
     "situ(gate_scale=2.5,linear_scale=none,clamp_limit=3)"),
    (moejit.SiTU(), "situ"),
    (moejit.SwiGLUStep(limit=5.5), "swiglu_step(limit=5.5)"),
    (moejit.GeGLU(), "geglu"),
    (moejit.GeGLUTanh(), "geglu_tanh"),
    (moejit.ReLU2(), "relu2"),
    (moejit.GELU(), "gelu"),
    (moejit.ReLU(), "relu"),
    (moejit.SiLU(), "silu"),
    (moejit.Identity(), "identity"),
]
KINDS = {moejit.GELU: 0, moejit.ReLU: 1, moejit.SiLU: 2, moejit.SwiGLU: 3, moejit.GeGLU: 4,
         moejit.ReLU2: 6, moejit.SwiGLUStep: 7, moejit.GeGLUTanh: 8, moejit.Identity: 9,
         moejit.SiTU: 10}


def c_parse(text):
    lib = moejit._lib_handle()
    h = _abi.activation_p()
    assert lib.moejit_activation_parse(text.encode(), ctypes.byref(h)) == 0, lib.moejit_last_error()
    return h


@pytest.mark.parametrize("act,human", VALUES, ids=[h for _, h in VALUES])
def test_equal_to_the_c_value_of_the_human_form(act, human):
    lib = moejit._lib_handle()
    h = c_parse(human)
    try:
        assert lib.moejit_activation_kind(h) == act.kind
        assert act.c_hash == lib.moejit_activation_hash(h)
        buf = ctypes.create_string_buffer(256)
        assert lib.moejit_activation_to_string(h, buf, 256, None) == 0
        assert str(act) == buf.value.decode()
        assert bool(lib.moejit_activation_is_gated(h)) == act.is_gated
    finally:
        lib.moejit_activation_destroy(h)
    assert moejit.parse_activation(human) == act
    assert hash(moejit.parse_activation(human)) == hash(act)


@pytest.mark.parametrize("act,human", VALUES, ids=[h for _, h in VALUES])
def test_canonical_text_is_the_clis(act, human):
    spec = cli_inspect(f"backend=simt,quant=bf16,act={human},arch=sm_90a")["spec"]
    act_field = dict(moejit.runtime.split_fields(spec))["act"]
    assert str(act) == act_field


@pytest.mark.parametrize("act,human", VALUES, ids=[h for _, h in VALUES])
def test_parse_round_trip(act, human):
    again = type(act).parse(str(act))
    assert again == act and str(again) == str(act) and again.kind == act.kind
    assert type(again) is type(act)


def test_kinds_are_the_abi_integers():
    for cls, kind in KINDS.items():
        assert cls.kind == kind
    assert moejit.parse_activation("geglu_tanh").kind == 8


def test_fields_hold_float32_values():
    a = moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0)
    assert a.alpha == f32(1.702) and a.beta == 1.0 and a.limit == 7.0
    assert moejit.SwiGLU().limit == moejit.FLT_MAX
    assert moejit.SiTU().linear_scale == 25.0 and moejit.SiTU().clamp_limit is None
    assert moejit.SwiGLU(alpha=1.702) == moejit.SwiGLU(alpha=f32(1.702))


def test_equality_and_hash_are_over_bits():
    assert moejit.SwiGLU(beta=-0.0) != moejit.SwiGLU(beta=0.0)
    assert moejit.SwiGLU(beta=-0.0).c_hash != moejit.SwiGLU(beta=0.0).c_hash
    assert moejit.SwiGLU(alpha=1.0 + 2 ** -30) == moejit.SwiGLU()  # rounds to the same float
    assert moejit.GeGLU() != moejit.GeGLUTanh()
    assert len({moejit.SwiGLU(), moejit.SwiGLU(alpha=1), moejit.SiLU(), moejit.SiLU()}) == 2


def test_frozen():
    a = moejit.SwiGLU()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.alpha = 2.0


@pytest.mark.parametrize("make,field", [
    (lambda: moejit.SwiGLU(limit=-1.0), "activation.limit"),
    (lambda: moejit.SwiGLU(alpha=math.nan), "activation.alpha"),
    (lambda: moejit.SwiGLU(beta=math.inf), "activation.beta"),
    (lambda: moejit.SwiGLU(limit=1e39), "activation.limit"),
    (lambda: moejit.SiTU(gate_scale=0.0), "activation.gate_scale"),
    (lambda: moejit.SiTU(clamp_limit=-2.0), "activation.clamp_limit"),
    (lambda: moejit.SwiGLUStep(limit=0.0), "activation.limit"),
])
def test_invalid_values_raise_the_library_message(make, field):
    with pytest.raises(moejit.InvalidArgument) as e:
        make()
    assert e.value.status == moejit._abi.ERR_INVALID_ARGUMENT
    assert str(e.value).startswith(field), str(e.value)
    assert str(e.value) == moejit._lib.last_error()


def test_parse_errors():
    with pytest.raises(moejit.InvalidArgument) as e:
        moejit.parse_activation("swiglu(alpha=1,gamma=2)")
    assert "gamma" in str(e.value)
    with pytest.raises(moejit.InvalidArgument, match="not swiglu"):
        moejit.SwiGLU.parse("gelu")
    with pytest.raises(moejit.InvalidArgument):
        moejit.parse_activation(3)
