"""Entry point of the ``clang`` plugin."""

from __future__ import annotations

from thork_core import Compiler, hookimpl


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import ClangCompiler

    return [ClangCompiler()]
