"""One guarded accessor for every GPU read (NVML and amdsmi), and the error names
the wire carries.

``query(lib, "nvmlDeviceGetPowerUsage", handle)`` returns the value, or an ``NA``
carrying the NVML error name ("NotSupported", "GpuIsLost", "FunctionNotFound" ...).
``lib`` is the real ``pynvml`` module or the simulator: both expose the same function
names, so the code above this layer is the same in both modes. The same accessor
reads AMD cards through ROCm's ``amdsmi`` module (or its simulator): its
``AmdSmiException`` errors become an ``NA`` with the name of their status code
(``AMDSMI_STATUS``), the same names as NVML's where they mean the same.
"""

from __future__ import annotations

import warnings
from typing import Any

try:  # pragma: no cover - depends on the host
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pynvml as _pynvml
except Exception:  # pragma: no cover - hosts without nvidia-ml-py
    _pynvml = None

MIB = 1024 * 1024

# Constants of the NVML C API (stable ABI values), so the simulator needs no pynvml.
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_EVENT_TYPE_XID = 0x8
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_DEVICE_ARCH_VOLTA = 5

# NVML error codes the helper and the simulator raise, by the name the wire uses.
ERROR_CODES: dict[str, int] = {
    "Uninitialized": 1,
    "InvalidArgument": 2,
    "NotSupported": 3,
    "NoPermission": 4,
    "NotFound": 6,
    "DriverNotLoaded": 9,
    "Timeout": 10,
    "LibraryNotFound": 12,
    "FunctionNotFound": 13,
    "GpuIsLost": 15,
    "ResetRequired": 16,
    "InUse": 19,
    "LibRmVersionMismatch": 18,
    "NotReady": 27,
    "Unknown": 999,
}
_NAMES_BY_CODE = {code: name for name, code in ERROR_CODES.items()}

# Active clock-limit reasons, bit -> name; "gpu_idle" is left out: it is not a fault.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)


# amdsmi_status_t codes (ROCm's amdsmi.h) -> the wire's error names: NVML's name where
# one means the same (a field answering either is "not available" alike).
AMDSMI_STATUS: dict[int, str] = {
    1: "InvalidArgument",  # AMDSMI_STATUS_INVAL
    2: "NotSupported",  # AMDSMI_STATUS_NOT_SUPPORTED
    3: "NotSupported",  # AMDSMI_STATUS_NOT_YET_IMPLEMENTED
    4: "LibraryNotFound",  # AMDSMI_STATUS_FAIL_LOAD_MODULE
    5: "FunctionNotFound",  # AMDSMI_STATUS_FAIL_LOAD_SYMBOL
    6: "DrmError",  # AMDSMI_STATUS_DRM_ERROR
    7: "ApiFailed",  # AMDSMI_STATUS_API_FAILED
    8: "Timeout",  # AMDSMI_STATUS_TIMEOUT
    9: "Retry",  # AMDSMI_STATUS_RETRY
    10: "NoPermission",  # AMDSMI_STATUS_NO_PERM
    11: "Interrupted",  # AMDSMI_STATUS_INTERRUPT
    12: "IoError",  # AMDSMI_STATUS_IO
    14: "FileError",  # AMDSMI_STATUS_FILE_ERROR
    15: "OutOfResources",  # AMDSMI_STATUS_OUT_OF_RESOURCES
    18: "InitError",  # AMDSMI_STATUS_INIT_ERROR
    30: "InUse",  # AMDSMI_STATUS_BUSY
    31: "NotFound",  # AMDSMI_STATUS_NOT_FOUND
    32: "Uninitialized",  # AMDSMI_STATUS_NOT_INIT
    34: "DriverNotLoaded",  # AMDSMI_STATUS_DRIVER_NOT_LOADED
    40: "NoData",  # AMDSMI_STATUS_NO_DATA
    43: "UnexpectedData",  # AMDSMI_STATUS_UNEXPECTED_DATA
    52: "FileNotFound",  # AMDSMI_STATUS_FILE_NOT_FOUND
}


class FallbackNVMLError(Exception):
    """Stands in for ``pynvml.NVMLError`` where nvidia-ml-py is not installed (sim only)."""

    value = ERROR_CODES["Unknown"]

    def __str__(self) -> str:
        return _NAMES_BY_CODE.get(self.value, "Unknown")


_FALLBACK_CLASSES: dict[int, type[FallbackNVMLError]] = {}


def _fallback_error(code: int) -> FallbackNVMLError:
    cls = _FALLBACK_CLASSES.get(code)
    if cls is None:
        name = "NVMLError_" + _NAMES_BY_CODE.get(code, "Unknown")
        cls = type(name, (FallbackNVMLError,), {"value": code})
        _FALLBACK_CLASSES[code] = cls
    return cls()


def nvml_error(name: str) -> Exception:
    """An NVML error by wire name, as the real bindings would raise it."""
    code = ERROR_CODES.get(name, ERROR_CODES["Unknown"])
    if _pynvml is not None:
        err: Exception = _pynvml.NVMLError(code)
        return err
    return _fallback_error(code)


def status_name(code: int) -> str | None:
    """An ``nvmlReturn_t`` held in a struct (e.g. a fabric registration's status) by
    its wire name: None for success, else the NVML error name (``NotReady`` ...)."""
    if code == 0:
        return None
    if _pynvml is not None:
        return error_name(_pynvml.NVMLError(code))
    return _NAMES_BY_CODE.get(code, "Unknown")


def error_bases() -> tuple[type[BaseException], ...]:
    if _pynvml is not None:
        return (FallbackNVMLError, _pynvml.NVMLError)
    return (FallbackNVMLError,)


def is_nvml_error(exc: BaseException) -> bool:
    return isinstance(exc, error_bases())


def error_name(exc: BaseException) -> str:
    """The wire name of an NVML error: ``NVMLError_GpuIsLost`` -> ``GpuIsLost``."""
    if isinstance(exc, AttributeError):
        return "FunctionNotFound"
    cls_name = type(exc).__name__
    if cls_name.startswith("NVMLError_") and len(cls_name) > len("NVMLError_"):
        return cls_name[len("NVMLError_") :]
    code = getattr(exc, "value", None)
    if isinstance(code, int) and code in _NAMES_BY_CODE:
        return _NAMES_BY_CODE[code]
    return "Unknown"


def error_text(exc: BaseException) -> str:
    """``Name: message`` for one-line reports (``LibRmVersionMismatch: RM has ...``)."""
    name = error_name(exc)
    try:
        msg = str(exc)
    except Exception:
        msg = ""
    return f"{name}: {msg}" if msg and msg != name else name


class NA:
    """A reading that could not be taken; ``error`` is the NVML error name."""

    __slots__ = ("error", "message")

    def __init__(self, error: str, message: str = "") -> None:
        self.error = error
        self.message = message

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"NA({self.error!r})"


def amd_error_name(exc: BaseException) -> str:
    """The wire name of an amdsmi error: its status code's (``AMDSMI_STATUS``); a
    parameter error (no code) is ``InvalidArgument``, an unknown code ``Unknown``."""
    code = getattr(exc, "err_code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return AMDSMI_STATUS.get(abs(code), "Unknown")
    if type(exc).__name__ == "AmdSmiParameterException":
        return "InvalidArgument"
    return "Unknown"


def _amd_bases(lib: Any) -> tuple[type[BaseException], ...]:
    base = getattr(lib, "AmdSmiException", None)
    if isinstance(base, type) and issubclass(base, BaseException):
        return (base,)
    return ()


def query(lib: Any, name: str, *args: Any) -> Any:
    """Call ``lib.name(*args)``; NVML (or, on ``amdsmi``, ``AmdSmiException``) errors
    and a missing function become ``NA``.

    Anything else (a bug, a ctypes surprise) propagates: the caller turns it into the
    GPU's ``error`` state, so it is never silently mistaken for a missing reading.
    """
    fn = getattr(lib, name, None)
    if fn is None:
        return NA("FunctionNotFound", f"{name} is not in this GPU library binding")
    try:
        return fn(*args)
    except error_bases() as exc:
        return NA(error_name(exc), error_text(exc))
    except Exception as exc:
        amd = _amd_bases(lib)
        if not amd or not isinstance(exc, amd):
            raise
        name_ = amd_error_name(exc)
        try:
            msg = " ".join(str(exc).split())
        except Exception:
            msg = ""
        return NA(name_, f"{name_}: {msg}"[:256] if msg else name_)


def text(value: Any, limit: int = 256) -> str:
    """NVML strings are ``bytes`` on old nvidia-ml-py: decode with replacement, cap size."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return str(value)[:limit]


def load_pynvml() -> Any | None:
    """The real bindings module, or None where nvidia-ml-py is not installed."""
    return _pynvml
