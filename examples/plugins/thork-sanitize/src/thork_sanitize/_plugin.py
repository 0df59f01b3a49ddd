"""The ``sanitize`` plugin's entry point: registers the two sanitizing compilers.

Kept cheap to import (every Thork process that asks the registry imports plugin modules
whose index entry is stale): the compiler classes load only when a hook is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thork_core.plugin import hookimpl

#: The plugin API versions this plugin was written against: Thork skips it, with a
#: warning, when core provides another (``thork_core.plugin.PLUGIN_API_VERSION``).
THORK_PLUGIN_API = ">=1.0,<2"

if TYPE_CHECKING:
    from thork_core.plugin import Compiler

#: The plugin API versions this plugin works with: Thork skips it, with one warning, when
#: its core's ``thork_core.plugin.PLUGIN_API_VERSION`` is outside.
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import AsanCompiler, UbsanCompiler

    return [UbsanCompiler(), AsanCompiler()]
