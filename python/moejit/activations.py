"""Activation values mirroring moejit_activation one to one: validated by the C constructors,
compared and hashed over exact float32 bits, printed in the library's canonical form."""
import ctypes
import dataclasses
import struct
from typing import ClassVar, Optional, Tuple

from . import _abi
from ._lib import check, lib
from .errors import InvalidArgument

FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


def f32(value) -> float:
    """value rounded to float32 (as the C API receives it), as a Python float."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"expected a number, got {value!r}") from None
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return v  # beyond float32: the C constructor names the field and refuses it


def f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class _Handle:
    """A moejit_activation * owned for the duration of a with block."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __enter__(self):
        return self.ptr

    def __exit__(self, *exc):
        lib().moejit_activation_destroy(self.ptr)


class Activation:
    """Base of every activation class; .kind is the ABI integer, str() the canonical form."""

    kind: ClassVar[int]
    name: ClassVar[str]
    gated: ClassVar[bool]
    params: ClassVar[Tuple[str, ...]] = ()

    def _create(self, out):
        return lib().moejit_activation_create(self.kind, out)

    def _handle(self) -> _Handle:
        ptr = _abi.activation_p()
        check(self._create(ctypes.byref(ptr)))
        return _Handle(ptr)

    def _finish(self):
        # Validated by the C constructor; fields keep exactly the float32 values it holds.
        with self._handle() as h:
            for name in self.params:
                value, present = ctypes.c_float(), ctypes.c_int()
                check(lib().moejit_activation_param(h, name.encode(), ctypes.byref(value),
                                                    ctypes.byref(present)))
                object.__setattr__(self, name, value.value if present.value else None)
            object.__setattr__(self, "_c_hash", int(lib().moejit_activation_hash(h)))

    def __post_init__(self):
        self._finish()

    def _bits(self):
        return tuple(None if getattr(self, p) is None else f32_bits(getattr(self, p))
                     for p in self.params)

    def __eq__(self, other):
        if not isinstance(other, Activation):
            return NotImplemented
        return self.kind == other.kind and self._bits() == other._bits()

    def __hash__(self):
        return hash(self._c_hash)

    @property
    def c_hash(self) -> int:
        """moejit_activation_hash of this value (the kind and the bits of every field)."""
        return self._c_hash

    @property
    def is_gated(self) -> bool:
        return self.gated

    def __str__(self):
        with self._handle() as h:
            n = ctypes.c_size_t()
            buf = ctypes.create_string_buffer(256)
            st = lib().moejit_activation_to_string(h, buf, len(buf), ctypes.byref(n))
            if st == _abi.ERR_BUFFER_TOO_SMALL:
                buf = ctypes.create_string_buffer(n.value + 1)
                st = lib().moejit_activation_to_string(h, buf, len(buf), ctypes.byref(n))
            check(st)
            return buf.value.decode()

    canonical = property(__str__)

    @classmethod
    def parse(cls, text: str) -> "Activation":
        """The activation of text (human or canonical form), through moejit_activation_parse;
        called on a subclass, the text must name that kind."""
        act = parse_activation(text)
        if cls is not Activation and not isinstance(act, cls):
            raise InvalidArgument(f"activation: {text!r} is {act.name}, not {cls.name}")
        return act


def _plain(kind, clsname, name, gated, doc):
    cls = type(clsname, (Activation,), {"kind": kind, "name": name, "gated": gated,
                                     "__doc__": doc, "__annotations__": {}})
    return dataclasses.dataclass(frozen=True, eq=False)(cls)


@dataclasses.dataclass(frozen=True, eq=False)
class SwiGLU(Activation):
    """g' = min(g, limit); u' = clamp(u, -limit, limit); g'·σ(alpha·g')·(u' + beta)."""

    alpha: float = 1.0
    beta: float = 0.0
    limit: float = FLT_MAX
    kind: ClassVar[int] = _abi.ACT_SWIGLU
    name: ClassVar[str] = "swiglu"
    gated: ClassVar[bool] = True
    params: ClassVar[Tuple[str, ...]] = ("alpha", "beta", "limit")

    def _create(self, out):
        return lib().moejit_activation_swiglu(f32(self.alpha), f32(self.beta), f32(self.limit),
                                              out)


@dataclasses.dataclass(frozen=True, eq=False)
class SwiGLUStep(Activation):
    """min(silu(g), limit)·clamp(u, -limit, limit)."""

    limit: float = 7.0
    kind: ClassVar[int] = _abi.ACT_SWIGLU_STEP
    name: ClassVar[str] = "swiglu_step"
    gated: ClassVar[bool] = True
    params: ClassVar[Tuple[str, ...]] = ("limit",)

    def _create(self, out):
        return lib().moejit_activation_swiglu_step(f32(self.limit), out)


@dataclasses.dataclass(frozen=True, eq=False)
class SiTU(Activation):
    """SiTU gate; linear_scale and clamp_limit may be None ("none")."""

    gate_scale: float = 4.0
    linear_scale: Optional[float] = 25.0
    clamp_limit: Optional[float] = None
    kind: ClassVar[int] = _abi.ACT_SITU
    name: ClassVar[str] = "situ"
    gated: ClassVar[bool] = True
    params: ClassVar[Tuple[str, ...]] = ("gate_scale", "linear_scale", "clamp_limit")

    def _create(self, out):
        ls = None if self.linear_scale is None else ctypes.byref(ctypes.c_float(f32(self.linear_scale)))
        cl = None if self.clamp_limit is None else ctypes.byref(ctypes.c_float(f32(self.clamp_limit)))
        return lib().moejit_activation_situ(f32(self.gate_scale), ls, cl, out)


GELU = _plain(_abi.ACT_GELU, "GELU", "gelu", False, "0.5·x·(1 + erf(x/√2)).")
ReLU = _plain(_abi.ACT_RELU, "ReLU", "relu", False, "max(x, 0).")
SiLU = _plain(_abi.ACT_SILU, "SiLU", "silu", False, "x·σ(x).")
GeGLU = _plain(_abi.ACT_GEGLU, "GeGLU", "geglu", True, "gelu_erf(g)·u.")
ReLU2 = _plain(_abi.ACT_RELU2, "ReLU2", "relu2", False, "relu(x)².")
GeGLUTanh = _plain(_abi.ACT_GEGLU_TANH, "GeGLUTanh", "geglu_tanh", True, "gelu_tanh(g)·u.")
Identity = _plain(_abi.ACT_IDENTITY, "Identity", "identity", False, "x.")

BY_KIND = {cls.kind: cls for cls in (GELU, ReLU, SiLU, SwiGLU, GeGLU, ReLU2, SwiGLUStep,
                                     GeGLUTanh, Identity, SiTU)}


def from_handle(h) -> Activation:
    """The Python value of a moejit_activation * (not consumed)."""
    cls = BY_KIND[lib().moejit_activation_kind(h)]
    kwargs = {}
    for name in cls.params:
        value, present = ctypes.c_float(), ctypes.c_int()
        check(lib().moejit_activation_param(h, name.encode(), ctypes.byref(value),
                                            ctypes.byref(present)))
        kwargs[name] = value.value if present.value else None
    return cls(**kwargs)


def parse_activation(text) -> Activation:
    """moejit_activation_parse: "swiglu(alpha=1.702,beta=1,limit=7)" or the canonical form;
    an Activation is returned as it is."""
    if isinstance(text, Activation):
        return text
    if not isinstance(text, str):
        raise InvalidArgument(f"activation: expected an Activation or a string, got {text!r}")
    ptr = _abi.activation_p()
    check(lib().moejit_activation_parse(text.encode(), ctypes.byref(ptr)))
    with _Handle(ptr) as h:
        return from_handle(h)
