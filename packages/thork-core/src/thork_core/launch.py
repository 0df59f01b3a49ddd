"""Launching loaded kernels: geometry checks, the one launcher every target uses, and
prepared launches (fixed geometry and scalars, only pointers per call) for front-ends that
check their arguments once; the geometry, shared-memory, scalar and aliasing checks.

:func:`make_launcher` makes a loaded kernel's launcher (native C where the extension can
be built, :class:`PyLauncher` otherwise; the ``CONV_*`` constants name the entry's calling
convention). :meth:`Executable.launch <thork_core.plugin.Executable.launch>` is the checked
path; :meth:`Executable.prepare <thork_core.plugin.Executable.prepare>` returns a
:class:`PreparedLaunch`; :func:`guarded_call_base` is the native hot path's base class
where the C extension is available; :func:`probe` and :func:`cai_pointer` read an
array's address and kind on a hot path without the adapters (:func:`typestr` and
:func:`dlpack_code` give a DType's ``__cuda_array_interface__`` typestr and DLPack
``(code, bits)``, what such a reading compares against). A plugin's C array reader
(``thork_array_reader.h`` in :func:`array_reader_include`, a capsule named
:data:`ARRAY_READER_CAPSULE`) reads its library's arrays on the native path;
:func:`refresh_readers` registers one that became available later. All of it is safe to
call from many threads.
"""

from __future__ import annotations

from ._binding import check_arg_count
from ._dtype import dlpack_code, typestr
from ._launch import (
    CONV_CU,
    CONV_HOST,
    CONV_HOST_STREAM,
    PreparedLaunch,
    PyLauncher,
    guarded_call_base,
    launch_call_base,
    make_launcher,
    out_maker,
    param_kinds,
    subscript_memo,
)
from ._limits import (
    MAX_SHARED_PER_BLOCK,
    byte_range,
    float_scalar,
    memory_range,
    overlapping,
    shared_bytes,
    static_shared_bytes,
)
from ._probe import (
    ARRAY_READER_CAPSULE,
    CAI,
    DLPACK,
    array_reader_include,
    cai_pointer,
    dlpack_probe,
    follow,
    followers,
    foreign_reader,
    implied_stream,
    kind_of,
    no_max_version,
    one_gpu,
    probe,
    refresh_readers,
)
from ._target import Dim3, normalize_dims

__all__ = ["ARRAY_READER_CAPSULE", "array_reader_include", "byte_range", "CAI",
           "cai_pointer", "check_arg_count", "CONV_CU", "CONV_HOST", "CONV_HOST_STREAM",
           "Dim3", "DLPACK", "dlpack_code", "dlpack_probe", "float_scalar", "follow",
           "followers", "foreign_reader", "guarded_call_base", "implied_stream", "kind_of",
           "launch_call_base", "make_launcher", "MAX_SHARED_PER_BLOCK", "memory_range",
           "no_max_version", "normalize_dims", "one_gpu", "out_maker", "overlapping",
           "param_kinds", "PreparedLaunch", "probe", "PyLauncher", "refresh_readers",
           "shared_bytes", "static_shared_bytes", "subscript_memo", "typestr"]
