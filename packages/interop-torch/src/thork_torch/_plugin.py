"""Entry point of the ``torch`` plugin: registers the torch-tensor array adapter.

Importing this module does not import torch; the adapter looks for it in ``sys.modules``
(a program that holds a tensor has imported torch already).
"""

from __future__ import annotations

from thork_core import ArrayAdapter, hookimpl

from ._adapter import TorchAdapter

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_array_adapters() -> list[ArrayAdapter]:
    return [TorchAdapter()]
