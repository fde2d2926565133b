"""The `moejit` command of the package: runs the bundled CLI with the same NVRTC the Python
library found."""
import os
import sys


def main():
    from . import _lib
    _lib.lib()  # finds NVRTC and puts its directory on LD_LIBRARY_PATH for the CLI
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "moejit")
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
