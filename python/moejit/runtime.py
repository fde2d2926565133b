"""Specs, contexts and kernels: spec text with the device's arch filled in, one moejit_context
per CUDA device, a kernel table the torch operator reads without compiling, and warm, inspect,
supports and the cache settings."""
import concurrent.futures
import ctypes
import dataclasses
import functools
import json
import os
import threading
from typing import Dict, Iterable, List, Optional, Tuple, Union

from . import _abi
from ._lib import check, lib
from .activations import Activation
from .errors import InvalidArgument, NotWarmed

# Compute capability -> moejit arch (core/spec.c's arch_cc).
ARCH_OF_CC = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a",
              (10, 0): "sm_100a", (12, 0): "sm_120a"}


# ---- spec text ---------------------------------------------------------------------------

def split_fields(text: str) -> List[Tuple[str, str]]:
    """The key=value fields of a text spec, split on commas outside parentheses."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text + ","):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            part = text[start:i].strip()
            start = i + 1
            if part:
                key, _, value = part.partition("=")
                out.append((key.strip(), value.strip()))
    return out


def _value_text(value) -> str:
    if isinstance(value, Activation):
        return str(value)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return value.hex()
    return str(value)


def make_spec(spec: Union[str, dict, None] = None, **fields) -> str:
    """Spec text from a text or JSON spec and/or keyword fields (act= may be an Activation);
    a keyword replaces the field of the same name; None values are left out."""
    if isinstance(spec, dict):
        spec = json.dumps(spec)
    fields = {k: v for k, v in fields.items() if v is not None}
    if spec is not None and not isinstance(spec, str):
        raise InvalidArgument(f"spec: expected a string or a dict, got {type(spec).__name__}")
    if spec and spec.lstrip().startswith("{"):
        obj = json.loads(spec)
        obj.update({k: _value_text(v) if isinstance(v, Activation) else v for k, v in fields.items()})
        return json.dumps(obj)
    pairs = [(k, v) for k, v in split_fields(spec or "") if k.lower() not in fields]
    pairs += [(k, _value_text(v)) for k, v in fields.items()]
    return ",".join(f"{k}={v}" for k, v in pairs)


def with_arch(spec: str, arch: str) -> str:
    """spec with arch=native (or no arch) replaced by arch; an explicit arch is kept."""
    if spec.lstrip().startswith("{"):
        obj = json.loads(spec)
        if str(obj.get("arch", "native")).lower() == "native":
            obj["arch"] = arch
        return json.dumps(obj)
    pairs = split_fields(spec)
    given = [v for k, v in pairs if k.lower() == "arch"]
    if given and given[-1].lower() != "native":
        return spec
    pairs = [(k, v) for k, v in pairs if k.lower() != "arch"] + [("arch", arch)]
    return ",".join(f"{k}={v}" for k, v in pairs)


class _Spec:
    """An owned moejit_spec *."""

    def __init__(self, text: str):
        self.ptr = _abi.spec_p()
        fn = lib().moejit_spec_from_json if text.lstrip().startswith("{") else lib().moejit_spec_parse
        check(fn(text.encode(), ctypes.byref(self.ptr)))

    @property
    def canonical(self) -> str:
        return lib().moejit_spec_canonical(self.ptr).decode()

    def __del__(self):
        if getattr(self, "ptr", None) and lib is not None:
            lib().moejit_spec_destroy(self.ptr)
            self.ptr = None


@functools.lru_cache(maxsize=1024)
def canonical(spec: str) -> str:
    """The canonical text of spec (arch=native resolves from device 0, as in C)."""
    return _Spec(spec).canonical


def fields_of(canonical_text: str) -> Dict[str, str]:
    return dict(split_fields(canonical_text))


@functools.lru_cache(maxsize=1024)
def describe(spec: str) -> Dict[str, str]:
    """The canonical fields that do not depend on the device (quant, dtype, act, routing,
    w1_layout, bias, ...): spec read with a stand-in arch, and simt for backend=auto."""
    text = with_arch(spec, "sm_90a")
    try:
        return fields_of(canonical(text))
    except InvalidArgument:
        raise
    except Exception:
        # backend=auto may find nothing on the stand-in arch; simt reads every format.
        return fields_of(canonical(make_spec(text, backend="simt")))


def arch_of_device(device) -> str:
    import torch
    cc = torch.cuda.get_device_capability(device)
    arch = ARCH_OF_CC.get(tuple(cc))
    if arch is None:
        from .errors import Unsupported
        raise Unsupported(f"arch: device {device} has compute capability {cc[0]}.{cc[1]}, which "
                          f"moejit does not target; supported: "
                          + ", ".join(f"{a}.{b} ({n})" for (a, b), n in ARCH_OF_CC.items()))
    return arch


# ---- settings and contexts ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
    """moejit_options: None/0 take the environment (MOEJIT_CACHE_DIR, MOEJIT_CACHE_MODE,
    MOEJIT_CACHE_MAX_BYTES, MOEJIT_COMPILE_TIMEOUT, MOEJIT_ALLOW_UNVALIDATED,
    MOEJIT_COMPILE_WORKER) or the library's default."""

    cache_dir: Optional[str] = None
    cache_mode: Optional[str] = None
    cache_max_bytes: int = 0
    compile_timeout_s: float = 0.0
    allow_unvalidated: Optional[bool] = None
    compile_worker: Optional[str] = None

    def options(self, device: int):
        o = _abi.moejit_options()
        lib().moejit_options_init(ctypes.byref(o))  # struct_size and the defaults
        o.cache_dir = os.fsencode(self.cache_dir) if self.cache_dir else None
        o.cache_mode = self.cache_mode.encode() if self.cache_mode else None
        o.cache_max_bytes = int(self.cache_max_bytes)
        o.compile_timeout_s = float(self.compile_timeout_s)
        o.device = int(device)
        o.allow_unvalidated = {None: 0, True: 1, False: -1}[self.allow_unvalidated]
        o.compile_worker = os.fsencode(self.compile_worker) if self.compile_worker else None
        return o


_lock = threading.RLock()
_settings = Settings()
_contexts: Dict[int, ctypes.c_void_p] = {}
_retired = []  # contexts replaced by configure(): their kernels may still be in use
# (canonical spec with arch, device) -> Kernel; the operator reads it under capture.
_kernels: Dict[Tuple[str, int], "Kernel"] = {}
# (spec text as given, device) -> Kernel: the operator's hit path without a parse.
_by_text: Dict[Tuple[str, int], "Kernel"] = {}


def configure(cache_dir: Optional[str] = None, cache_mode: Optional[str] = None,
              cache_max_bytes: int = 0, compile_timeout_s: float = 0.0,
              allow_unvalidated: Optional[bool] = None,
              compile_worker: Optional[str] = None) -> Settings:
    """Sets the cache and compile settings of the contexts made from now on (kernels already
    loaded stay valid); returns them. allow_unvalidated: None follows the environment, True
    runs kernel tuples not yet validated on hardware, False never does."""
    global _settings
    new = Settings(cache_dir, cache_mode, cache_max_bytes, compile_timeout_s, allow_unvalidated,
                   compile_worker)
    with _lock:
        # Validated now, by the library, rather than at the first compile.
        ctx = _abi.context_p()
        check(lib().moejit_context_create(ctypes.byref(new.options(0)), ctypes.byref(ctx)))
        lib().moejit_context_destroy(ctx)
        _settings = new
        _retired.extend(_contexts.values())
        _contexts.clear()
        _kernels.clear()
        _by_text.clear()
    return new


def settings() -> Settings:
    return _settings


def context(device: int = 0):
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = _abi.context_p()
            check(lib().moejit_context_create(ctypes.byref(_settings.options(device)),
                                              ctypes.byref(ctx)))
            _contexts[device] = ctx
        return ctx


@dataclasses.dataclass(frozen=True)
class KernelResources:
    name: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


class Kernel:
    """A compiled layer (moejit_kernel *, owned by its context)."""

    def __init__(self, ptr, spec: _Spec, device: int):
        self.ptr = ptr
        self._spec = spec
        self.device = device

    @property
    def spec(self) -> str:
        return lib().moejit_spec_canonical(lib().moejit_kernel_spec(self.ptr)).decode()

    @property
    def key(self) -> str:
        return lib().moejit_kernel_key(self.ptr).decode()

    @property
    def compile_seconds(self) -> float:
        return lib().moejit_kernel_compile_seconds(self.ptr)

    @property
    def loaded(self) -> bool:
        return bool(lib().moejit_kernel_is_loaded(self.ptr))

    @property
    def resources(self) -> List[KernelResources]:
        out = []
        for i in range(lib().moejit_kernel_count(self.ptr)):
            r = _abi.moejit_kernel_resources()
            check(lib().moejit_kernel_resources_get(self.ptr, i, ctypes.byref(r)))
            out.append(KernelResources((r.name or b"").decode(), r.registers, r.shared_bytes,
                                       r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes))
        return out

    def workspace_size(self, args) -> int:
        n = ctypes.c_size_t()
        check(lib().moejit_workspace_size(self.ptr, ctypes.byref(args), ctypes.byref(n)))
        return n.value

    def __repr__(self):
        return f"Kernel({self.spec!r}, key={self.key[:16]}..., device={self.device})"


def _resolve(spec: str, device: Optional[int]) -> str:
    """spec with its arch: the given one, else device's (a CUDA device index), else native."""
    if device is None:
        return spec
    return with_arch(spec, arch_of_device(device))


def get_kernel(spec: str, device: Optional[int] = None, compile: bool = True) -> Kernel:
    """The kernel of spec for device (compiled, or read from the disk cache, and loaded when
    there is a GPU). compile=False: only a kernel already in this process, else NotWarmed."""
    dev = 0 if device is None else device
    k = _by_text.get((spec, dev))
    if k is not None:
        return k
    s = _Spec(_resolve(spec, device))
    key = (s.canonical, dev)
    with _lock:
        k = _kernels.get(key)
    if k is None:
        if not compile:
            raise NotWarmed(
                f"moejit: the kernel for {s.canonical} on cuda:{dev} is not compiled and loaded "
                f"yet, and it cannot be during CUDA-graph capture; call layer.warm(device) or "
                f"moejit.warm([spec], device={dev}) before capturing")
        ptr = _abi.kernel_p()
        check(lib().moejit_kernel_get(context(dev), s.ptr, ctypes.byref(ptr)))
        with _lock:
            k = _kernels.setdefault(key, Kernel(ptr, s, dev))
    with _lock:
        _by_text[(spec, dev)] = k
    return k


def _device_index(device) -> Optional[int]:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    import torch
    d = torch.device(device)
    if d.type != "cuda":
        raise InvalidArgument(f"device: expected a CUDA device, got {d}")
    return d.index if d.index is not None else torch.cuda.current_device()


@dataclasses.dataclass(frozen=True)
class WarmResult:
    """One spec's outcome in warm(): the kernel, or the library's message."""

    spec: str
    ok: bool
    message: str
    compiled: bool
    seconds: float
    kernel: Optional[Kernel] = None


def warm(specs: Iterable[Union[str, dict, "object"]], jobs: Optional[int] = None,
         device=None, raise_on_error: bool = True) -> List[WarmResult]:
    """Compiles (or reads from the disk cache) and loads each spec's kernel, jobs at a time
    (moejit_warm), so that later forwards and CUDA-graph captures find them. Specs without an
    arch take device's (when given) or arch=native. Every spec is attempted; with
    raise_on_error the first failure is raised afterwards (its .results holds them all)."""
    from .layer import MoE
    dev = _device_index(device)
    texts = []
    for s in specs:
        if isinstance(s, MoE):
            texts.append(s.spec)
        elif isinstance(s, dict):
            texts.append(json.dumps(s))
        else:
            texts.append(s)
    if not texts:
        return []
    # a tensor-core layer is several modules, which warm in parallel too
    jobs = jobs or (os.cpu_count() or 1)
    if dev is not None:
        _make_current(dev)
    parsed = [_Spec(_resolve(t, dev)) for t in texts]
    outcome = [None] * len(texts)

    def progress(_user, r):
        r = r.contents
        outcome[r.index] = (r.status, (r.message or b"").decode("utf-8", "replace"),
                            bool(r.compiled), r.seconds)

    callback = _abi.warm_progress_fn(progress)
    arr = (_abi.spec_p * len(parsed))(*[p.ptr for p in parsed])
    failed = ctypes.c_size_t()
    lib().moejit_warm(context(0 if dev is None else dev), arr, len(parsed), int(jobs), callback,
                      None, ctypes.byref(failed))
    results = []
    for text, p, o in zip(texts, parsed, outcome):
        status, message, compiled, seconds = o or (_abi.ERR_INTERNAL, "no result", False, 0.0)
        kernel = get_kernel(text, dev) if status == _abi.OK else None
        results.append(WarmResult(p.canonical, status == _abi.OK, message, compiled, seconds,
                                  kernel))
    if raise_on_error:
        for r, o in zip(results, outcome):
            if not r.ok:
                from .errors import from_status
                err = from_status(o[0] if o else _abi.ERR_INTERNAL,
                                  f"warm: {failed.value} of {len(texts)} specs failed; "
                                  f"{r.spec}: {r.message}")
                err.results = results
                raise err
    return results


def _make_current(dev: int) -> None:
    """Initialises torch's CUDA on dev so the library loads into its primary context."""
    import torch
    torch.cuda.init()
    with torch.cuda.device(dev):
        torch.cuda.current_stream(dev)


@dataclasses.dataclass(frozen=True)
class Inspection:
    spec: str
    supported: bool
    reason: str
    key: Optional[str] = None
    compile_seconds: Optional[float] = None
    loaded: Optional[bool] = None
    kernels: Tuple[KernelResources, ...] = ()


def inspect(spec: Union[str, dict], compile: bool = True, device=None) -> Inspection:
    """The canonical form, the support verdict and, when compile is true and the spec is
    supported, the cache key and each kernel's resources (compiling when not cached)."""
    text = make_spec(spec)
    dev = _device_index(device)
    s = _Spec(_resolve(text, dev))
    st = lib().moejit_check_support(s.ptr)
    reason = "" if st == _abi.OK else lib().moejit_last_error().decode()
    if st not in (_abi.OK, _abi.ERR_UNSUPPORTED):
        check(st)
    if st != _abi.OK or not compile:
        return Inspection(s.canonical, st == _abi.OK, reason)
    k = get_kernel(text, dev)
    return Inspection(s.canonical, True, "", k.key, k.compile_seconds, k.loaded,
                      tuple(k.resources))


def supports(spec: Union[str, dict, None] = None, **fields) -> bool:
    """True when the spec's backend supports it (moejit_check_support); see support_reason."""
    return support_reason(spec, **fields) == ""


def support_reason(spec: Union[str, dict, None] = None, **fields) -> str:
    """'' when supported, else the library's reason; an invalid spec raises InvalidArgument."""
    s = _Spec(make_spec(spec, **fields))
    st = lib().moejit_check_support(s.ptr)
    if st == _abi.OK:
        return ""
    if st == _abi.ERR_UNSUPPORTED:
        return lib().moejit_last_error().decode()
    check(st)
    return ""
