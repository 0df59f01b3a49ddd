"""The ``sanitize`` plugin's entry point: registers the two sanitizing compilers.

Kept cheap to import (every Thork process that asks the registry imports plugin modules
whose index entry is stale): the compiler classes load only when a hook is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thork_core.plugin import hookimpl

if TYPE_CHECKING:
    from thork_core.plugin import Compiler


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import AsanCompiler, UbsanCompiler

    return [UbsanCompiler(), AsanCompiler()]
