"""Builds the C library, its compile worker and the CLI with the repository's Makefile and
puts them into the package: moejit/lib (libmoejit.so.0 and the non-CUDA libraries it needs),
moejit/libexec (the worker, found by the library as ../libexec beside itself), moejit/bin and
moejit/include.

MOEJIT_SOURCE_DIR: the moejit source tree (default: this directory's parent).
MOEJIT_BUILD_DIR: make's BUILD directory (default: build/native here, kept between builds).
MOEJIT_MAKE_ARGS: more arguments for make (split on spaces), e.g. "CC=clang".
CUDA_HOME: the toolkit make builds against (default: the Makefile's search).
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("MOEJIT_SOURCE_DIR") or os.path.dirname(HERE)
BUILD = os.environ.get("MOEJIT_BUILD_DIR") or os.path.join(HERE, "build", "native")
# Libraries every Linux system or CUDA install has; the library's other direct dependencies
# (cJSON, libcrypto, ...) are bundled, as a GPU host may lack them.
SYSTEM = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux",
          "libgcc_s.so", "libstdc++.so", "libnvrtc", "libcuda.so")


def _needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def _system_library(soname):
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.strip().split(" => ")
        if len(parts) == 2 and parts[0].split()[0] == soname and "x86-64" in parts[0]:
            return parts[1]
    return None


class BuildNative(build_py):
    def run(self):
        super().run()
        if not os.path.exists(os.path.join(SOURCE, "include", "moejit.h")):
            sys.exit(f"moejit: no source tree at {SOURCE} (set MOEJIT_SOURCE_DIR)")
        jobs = str(os.cpu_count() or 1)
        extra = os.environ.get("MOEJIT_MAKE_ARGS", "").split()
        subprocess.check_call(["make", "-C", SOURCE, f"BUILD={os.path.abspath(BUILD)}",
                               f"-j{jobs}", *extra, "all"])
        pkg = os.path.join(self.build_lib, "moejit")
        dirs = {d: os.path.join(pkg, d) for d in ("lib", "libexec", "bin", "include")}
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        shutil.copyfile(os.path.join(BUILD, "lib", "libmoejit.so.0"),
                        os.path.join(dirs["lib"], "libmoejit.so.0"))
        for src, dst in (("libexec/moejit-compile-worker", "libexec"), ("bin/moejit", "bin")):
            target = os.path.join(dirs[dst], os.path.basename(src))
            shutil.copyfile(os.path.join(BUILD, src), target)
            os.chmod(target, 0o755)
        shutil.copyfile(os.path.join(SOURCE, "include", "moejit.h"),
                        os.path.join(dirs["include"], "moejit.h"))
        for soname in _needed(os.path.join(dirs["lib"], "libmoejit.so.0")):
            path = None if soname.startswith(SYSTEM) else _system_library(soname)
            if path:
                shutil.copyfile(path, os.path.join(dirs["lib"], soname))


class BinaryDistribution(Distribution):
    """The wheel carries native code, so it is tagged for the platform."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildNative}
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70
    from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: ctypes needs no particular Python ABI."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


cmdclass["bdist_wheel"] = PlatformWheel
setup(distclass=BinaryDistribution, cmdclass=cmdclass)
