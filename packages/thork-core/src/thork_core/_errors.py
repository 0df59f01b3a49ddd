"""Exceptions raised by Thork. Each message names what was expected and what came."""

from __future__ import annotations

__all__ = [
    "ThorkError", "TraceError", "CompileError", "LaunchError", "ArgumentError",
    "PluginError", "NoTargetError", "BoundsError", "DeviceError",
    "BundleError", "ArchError",
]


class ThorkError(Exception):
    """Base of every Thork error."""


class TraceError(ThorkError, TypeError):
    """The Python function did something a kernel cannot express."""


class CompileError(ThorkError):
    """A compiler rejected generated source. ``log`` holds the compiler's diagnostics,
    which point at Python files and lines through ``#line`` directives."""

    def __init__(self, message: str, log: str = "", source: str = "") -> None:
        super().__init__(message + (f"\n{log}" if log else ""))
        self.log = log
        self.source = source


class ArchError(CompileError):
    """A kernel uses an instruction the target GPU architecture lacks (Hopper's ``wgmma``,
    TMA and ``mbarrier`` transactions exist on ``sm_90a`` only). ``kernel``, ``feature``
    and ``arch`` (the architecture asked for) name what clashed."""

    def __init__(self, kernel: str, feature: str, arch: str, need: str) -> None:
        super().__init__(f"kernel '{kernel}' uses {feature}, which needs {need}; the target "
                         f"GPU is {arch}, which lacks it")
        self.kernel = kernel
        self.feature = feature
        self.arch = arch
        self.need = need

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:
        # Pickles (process pools, Dask) rebuild it from its fields, not from the message.
        return (type(self), (self.kernel, self.feature, self.arch, self.need))


class LaunchError(ThorkError):
    """The driver or the CPU runtime failed to run a kernel."""


class ArgumentError(ThorkError, TypeError):
    """A launch argument or launch geometry does not match the kernel's signature."""


class DeviceError(ArgumentError):
    """A launch's arrays live on different CUDA devices, or on another device than the
    one the launch names (``device=``), or a named device does not exist. The message
    names the kernel (or pipe), the parameter and both devices."""


class BundleError(ThorkError):
    """The ahead-of-time bundle ``THORK_CACHE_BUNDLE`` names fails a check (not this
    user's, writable by others, a bad manifest, an entry that does not match it)."""


class PluginError(ThorkError):
    """A requested compiler or target is not installed or not usable here."""


class NoTargetError(PluginError):
    """No installed target can run the kernel."""


class BoundsError(LaunchError, IndexError):
    """Debug mode (``@tk.jit(debug=True)``, ``THORK_DEBUG=1``): a kernel indexed an array
    outside its bounds. The first violation of the launch is reported; its fields say where.

    ``kernel``, ``array`` (parameter or local name), ``param_index`` (position among the
    kernel's parameters, or None for shared/local/module arrays), ``index`` (elements),
    ``lo``/``hi`` (the valid range, ``lo <= index < hi``), ``file``/``line`` (the Python
    source), ``block``/``thread`` (the offending CUDA thread)."""

    def __init__(self, message: str, **fields: object) -> None:
        super().__init__(message)
        self.kernel = fields.get("kernel")
        self.array = fields.get("array")
        self.param_index = fields.get("param_index")
        self.index = fields.get("index")
        self.lo = fields.get("lo")
        self.hi = fields.get("hi")
        self.file = fields.get("file")
        self.line = fields.get("line")
        self.block = fields.get("block")
        self.thread = fields.get("thread")
