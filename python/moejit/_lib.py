"""Loads libmoejit: its NVRTC first (CUDA toolkit or the nvidia-cuda-nvrtc wheel), then the
library, and reports every failure as a moejit.Error carrying the library's message."""
import ctypes
import glob
import os
import struct
import sys
import threading

from . import _abi
from .errors import LibraryNotFound, from_status

_HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.join(_HERE, "lib")
LIBEXEC_DIR = os.path.join(_HERE, "libexec")
LIB_NAME = "libmoejit.so.0"

_lock = threading.Lock()
_lib = None
# What was found where, for moejit.info() and error messages.
found = {}


def _elf_needed(path):
    """The DT_NEEDED sonames of an ELF64 little-endian shared object (empty if unreadable)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for s in sections:
        if s[1] != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[s[6]]
        for off in range(s[4], s[4] + s[5], 16):
            tag, val = struct.unpack_from("<qQ", data, off)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                start = strtab[4] + val
                out.append(data[start:data.index(b"\0", start)].decode())
    return out


def library_path():
    """The libmoejit to load: $MOEJIT_LIBRARY, else the one bundled in the package."""
    env = os.environ.get("MOEJIT_LIBRARY")
    if env:
        return env
    return os.path.join(LIB_DIR, LIB_NAME)


def _try_load(name):
    try:
        return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        return e


def _wheel_dirs():
    """lib directories of installed NVIDIA wheels (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib)."""
    dirs = []
    for entry in sys.path:
        base = os.path.join(entry or ".", "nvidia")
        if os.path.isdir(base):
            dirs += sorted(glob.glob(os.path.join(base, "cu*", "lib")), reverse=True)
            dirs += glob.glob(os.path.join(base, "cuda_nvrtc", "lib"))
    return dirs


def nvrtc_candidates(soname):
    """Directories to look for soname in, in order, after the dynamic linker's own search."""
    dirs = []
    if os.environ.get("MOEJIT_NVRTC"):
        dirs.append(os.path.dirname(os.environ["MOEJIT_NVRTC"]))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs += [os.path.join(os.environ[var], d) for d in ("lib64", "lib")]
    dirs += _wheel_dirs()
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
    return [d for d in dict.fromkeys(dirs) if os.path.exists(os.path.join(d, soname))]


def _prepend_env_path(var, directory):
    parts = [p for p in os.environ.get(var, "").split(":") if p]
    if directory not in parts:
        os.environ[var] = ":".join([directory] + parts)


def _load_nvrtc(soname):
    """Loads NVRTC globally so libmoejit binds to it, and makes the compile worker (a separate
    process, which inherits the environment) find the same one through LD_LIBRARY_PATH."""
    explicit = os.environ.get("MOEJIT_NVRTC")
    if not explicit:
        h = _try_load(soname)
        if not isinstance(h, OSError):
            found["nvrtc"] = f"{soname} (dynamic linker search)"
            return
    tried = []
    for d in nvrtc_candidates(soname):
        path = os.path.join(d, soname)
        h = _try_load(path)
        if isinstance(h, OSError):
            tried.append(f"{path}: {h}")
            continue
        found["nvrtc"] = path
        _prepend_env_path("LD_LIBRARY_PATH", d)
        return
    major = soname.rsplit(".", 1)[-1]
    wheel = "nvidia-cuda-nvrtc" if int(major) >= 13 else f"nvidia-cuda-nvrtc-cu{major}"
    raise LibraryNotFound(
        f"moejit needs NVRTC {soname} (CUDA {major}.x), which was not found: install the wheel "
        f"(pip install '{wheel}=={major}.*'), or a CUDA {major} toolkit in the dynamic linker's "
        f"path or at $CUDA_HOME; tried the dynamic linker"
        + ("".join(f"; {t}" for t in tried)))


def _load_bundled_deps(needed):
    """Non-CUDA libraries the package bundles (cJSON, libcrypto) are used only where the system
    lacks them, so a process never holds two copies of one library."""
    for soname in needed:
        bundled = os.path.join(os.path.dirname(library_path()), soname)
        if not os.path.exists(bundled) or soname.startswith("libnvrtc"):
            continue
        if isinstance(_try_load(soname), OSError):
            h = _try_load(bundled)
            if isinstance(h, OSError):
                raise LibraryNotFound(f"moejit: cannot load the bundled {bundled}: {h}")
            found[soname] = bundled


def lib():
    """The loaded, bound libmoejit (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise LibraryNotFound(
                f"moejit: the library {path} is missing; reinstall the package (pip install "
                f"./python from the moejit source tree) or set MOEJIT_LIBRARY")
        needed = _elf_needed(path)
        nvrtc = next((n for n in needed if n.startswith("libnvrtc.so")), None)
        if nvrtc:
            _load_nvrtc(nvrtc)
        _load_bundled_deps(needed)
        try:
            handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise LibraryNotFound(f"moejit: cannot load {path}: {e}") from None
        _abi.bind(handle)
        found["library"] = path
        worker = os.path.join(LIBEXEC_DIR, "moejit-compile-worker")
        if os.path.exists(worker):
            found["worker"] = worker
        _lib = handle
        return _lib


def last_error() -> str:
    return lib().moejit_last_error().decode("utf-8", "replace")


def check(status: int) -> None:
    """Raises the moejit.Error subclass of a failed status with the library's message."""
    if status != _abi.OK:
        raise from_status(status, last_error())


def has(name: str) -> bool:
    return hasattr(lib(), name)
