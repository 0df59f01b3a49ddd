"""thork-sanitize: host C++ compilers that build the CPU target's kernels with sanitizers.

``compiler="cxx-ubsan"`` reports undefined behaviour (shifts past the width, misaligned
or null accesses...) on stderr while the kernel keeps running; ``compiler="cxx-asan"``
stops at the first out-of-bounds or use-after-free access with a report naming the
kernel's source line. AddressSanitizer's runtime must be the first library of the
process: run Python under ``LD_PRELOAD=$(c++ -print-file-name=libasan.so)
ASAN_OPTIONS=detect_leaks=0`` (``cxx-asan`` says so when it is missing).

Neither becomes the default compiler: ask for one per kernel, per call or with
``THORK_COMPILER``.
"""

from __future__ import annotations

from ._compiler import AsanCompiler, SanitizingCompiler, UbsanCompiler, asan_preload

__all__ = ["AsanCompiler", "SanitizingCompiler", "UbsanCompiler", "asan_preload"]
__version__ = "0.1.0"
