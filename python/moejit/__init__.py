"""moejit: JIT-compiled, cached fused Mixture-of-Experts CUDA kernels for PyTorch.

    import torch, moejit
    act = moejit.SwiGLU(alpha=1.702, beta=1.0, limit=7.0)
    layer = moejit.MoE(quant="bf16", activation=act, routing="renormalize",
                       w1_layout="interleaved", bias="both", backend="auto", topk=4)
    out = layer(x, w1, w2, router_logits, b1=b1, b2=b2)   # or moejit.ops.fused_moe(spec, ...)
"""
from . import _abi
from ._lib import found as _found, lib as _lib_handle
from .activations import (FLT_MAX, GELU, Activation, GeGLU, GeGLUTanh, Identity, ReLU, ReLU2,
                          SiLU, SiTU, SwiGLU, SwiGLUStep, parse_activation)
from .errors import (BufferTooSmall, CacheMiss, CompileError, CudaError, Error, InternalError,
                     InvalidArgument, IOFailure, LibraryNotFound, NoDevice, NoDriver, NotWarmed,
                     OutOfMemory, Unsupported)
from .layer import MoE
from .runtime import (Inspection, Kernel, KernelResources, Settings, WarmResult, canonical,
                      configure,
                      get_kernel, inspect, make_spec, settings, support_reason, supports, warm)

__version__ = "0.1.0"

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the activation, spec and cache API work without torch
    _torch = None
if _torch is not None:
    from . import ops
    from .ops import fused_moe


def version() -> str:
    """The C library's version."""
    return _lib_handle().moejit_version().decode()


def nvrtc_version():
    """(major, minor) of the NVRTC the library runs with."""
    import ctypes
    from ._lib import check
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(_lib_handle().moejit_nvrtc_version(ctypes.byref(major), ctypes.byref(minor)))
    return major.value, minor.value


def info() -> dict:
    """Where the library, its compile worker and NVRTC were found, and their versions."""
    v = version()
    return dict(_found, version=v, nvrtc_version="%d.%d" % nvrtc_version())
