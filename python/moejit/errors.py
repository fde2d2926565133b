"""moejit.Error and its subclasses, one per moejit_status, carrying .status and the message."""
from . import _abi


class Error(Exception):
    """A failed moejit call: .status is the moejit_status number, .message the library's text."""

    status = None

    def __init__(self, message: str, status: int = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgument(Error, ValueError):
    status = _abi.ERR_INVALID_ARGUMENT


class Unsupported(Error):
    status = _abi.ERR_UNSUPPORTED


class OutOfMemory(Error, MemoryError):
    status = _abi.ERR_OUT_OF_MEMORY


class CompileError(Error):
    status = _abi.ERR_COMPILE


class NoDriver(Error):
    status = _abi.ERR_NO_DRIVER


class NoDevice(Error):
    status = _abi.ERR_NO_DEVICE


class CudaError(Error):
    status = _abi.ERR_CUDA


class IOFailure(Error, OSError):
    status = _abi.ERR_IO


class CacheMiss(Error):
    status = _abi.ERR_CACHE_MISS


class InternalError(Error):
    status = _abi.ERR_INTERNAL


class BufferTooSmall(Error):
    status = _abi.ERR_BUFFER_TOO_SMALL


class LibraryNotFound(Error, ImportError):
    """libmoejit or one of its libraries (NVRTC) could not be loaded; no moejit_status."""


class NotWarmed(Error):
    """A kernel would have to be compiled or loaded during CUDA-graph capture."""
    status = _abi.ERR_NOT_WARMED


BY_STATUS = {cls.status: cls for cls in (InvalidArgument, Unsupported, OutOfMemory, CompileError,
                                         NoDriver, NoDevice, CudaError, IOFailure, CacheMiss,
                                         InternalError, BufferTooSmall, NotWarmed)}


def from_status(status: int, message: str) -> Error:
    cls = BY_STATUS.get(status)
    if cls is None:
        return Error(f"{message} (status {status})", status)
    return cls(message)
