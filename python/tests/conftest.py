"""Shared fixtures: a private cache directory, the bundled CLI, and the CUDA skip."""
import json
import os
import subprocess
import tempfile

import pytest

# Before the first context: the tests never touch the user's cache.
os.environ.setdefault("MOEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="moejit-pytest-cache-"))

import moejit  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

HAVE_CUDA = torch is not None and torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")


def cli_path():
    """$MOEJIT_CLI, else the CLI bundled in the installed package."""
    env = os.environ.get("MOEJIT_CLI")
    if env:
        return env
    return os.path.join(os.path.dirname(moejit.__file__), "bin", "moejit")


def run_cli(*args):
    moejit._lib_handle()  # NVRTC's directory on LD_LIBRARY_PATH, as for the worker
    out = subprocess.run([cli_path(), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"moejit {' '.join(args)}: {out.returncode}\n{out.stderr}")
    return out.stdout


def cli_inspect(spec):
    """`moejit inspect SPEC --no-compile --json` as a dict."""
    return json.loads(run_cli("inspect", spec, "--no-compile", "--json"))


@pytest.fixture
def cli():
    return run_cli
