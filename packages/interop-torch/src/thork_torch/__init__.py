"""Thork and PyTorch (``import thork_torch``).

* torch tensors (CPU and CUDA, every Thork dtype) go into ``@tk.jit`` kernels and fkl
  pipes without copies, through the ``torch`` array adapter this plugin registers;
* :func:`wrap` runs a launch or a pipe on torch's current stream (or ``stream=``), tells
  torch's caching allocator about cross-stream use, and with ``output="like_input"``
  returns torch tensors;
* :func:`custom_op` registers a launch or a pipe as a ``torch.library`` custom op with a
  fake implementation, for ``torch.compile(fullgraph=True)`` and CUDA graph capture;
* :func:`build_reader` builds the C++ reader through which core's hot paths read CUDA
  tensors (``THORK_TORCH_READER``; :func:`reader_status` says which reader serves,
  :func:`reader_report` the same without building, for ``thork info``).

Importing this package does not import torch (its functions import it when called; the
adapter finds it in ``sys.modules``).
"""

from __future__ import annotations

from ._adapter import TorchAdapter, tensor_view
from ._call import OUTPUTS, TorchCall, wrap
from ._custom_op import custom_op, pipe_output_specs
from ._dtypes import to_thork, to_torch
from ._reader import build_reader, reader_report, reader_status

__all__ = ["OUTPUTS", "TorchAdapter", "TorchCall", "build_reader", "custom_op",
           "pipe_output_specs", "reader_report", "reader_status", "tensor_view", "to_thork",
           "to_torch", "wrap"]
__version__ = "0.1.0"
