"""A plugin's C array reader (``thork_array_reader.h``, session 19) on core's native path,
without a GPU and without torch: a stand-in reader written in C (built here through the
public :func:`thork_core.build.host_extension`, the path thork_torch's reader takes) tells
the Binder and the Guard what the test sets for each object, and the Recorder of
test_native_launch stands in for ``cuLaunchKernel``. What the reader says must be what
is launched, every call: a changed pointer, shape, dtype, contiguity, device or current
stream is seen on the next call, and anything the reader cannot read goes to the
caller's path with nothing raised."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import run_threads
from helpers.launch_recorder import Recorder, assert_thread_launches, make_binder
from helpers.launch_recorder import run_binder as _run
from thork_core import DeviceArray
from thork_core._probe import KINDS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX C compiler")

_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "thork_array_reader.h"

/* what the reader answers, per object (the test keeps the objects alive) */
typedef struct { PyObject *obj, *dtype; ThorkArrayInfo info; int64_t shape[4]; int ok; } Entry;
static Entry entries[32];
static _Thread_local uint64_t stream;
static _Thread_local int stream_ok = 1;
static long reads;

static int rd(void *obj, ThorkArrayInfo *info) {
    reads++;
    for (int i = 0; i < 32; i++)
        if (entries[i].obj == obj) {
            if (!entries[i].ok) return 0;
            *info = entries[i].info;
            info->shape = entries[i].shape;
            info->dtype = entries[i].dtype;
            return 1;
        }
    return 0;
}
static int rd_raising(void *obj, ThorkArrayInfo *info) {
    (void)obj; (void)info;
    PyErr_SetString(PyExc_RuntimeError, "a reader that breaks its contract");
    return 0;
}
static int cs(int32_t device, uint64_t *handle) {
    (void)device;
    if (!stream_ok) return 0;
    *handle = stream;
    return 1;
}
static ThorkArrayReader good = {THORK_ARRAY_READER_ABI, sizeof(ThorkArrayReader), rd, cs};
static ThorkArrayReader raising = {THORK_ARRAY_READER_ABI, sizeof(ThorkArrayReader), rd_raising, cs};
static ThorkArrayReader bad_abi = {THORK_ARRAY_READER_ABI + 1, sizeof(ThorkArrayReader), rd, cs};
static ThorkArrayReader small = {THORK_ARRAY_READER_ABI, 8, rd, cs};
static ThorkArrayReader no_fn = {THORK_ARRAY_READER_ABI, sizeof(ThorkArrayReader), rd, NULL};

static PyObject *set_entry(PyObject *self, PyObject *args) {
    int i, dev_type, dev_id, contiguous, ok;
    unsigned long long ptr;
    PyObject *obj, *shape, *dtype;
    if (!PyArg_ParseTuple(args, "iOKO!Oiiii", &i, &obj, &ptr, &PyTuple_Type, &shape, &dtype,
                          &dev_type, &dev_id, &contiguous, &ok))
        return NULL;
    Entry *e = &entries[i];
    e->obj = obj;
    Py_INCREF(dtype);
    Py_XSETREF(e->dtype, dtype);
    e->info.ptr = ptr;
    e->info.ndim = (int32_t)PyTuple_GET_SIZE(shape);
    for (int d = 0; d < e->info.ndim && d < 4; d++)
        e->shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
    e->info.device_type = dev_type;
    e->info.device_id = dev_id;
    e->info.contiguous = contiguous;
    e->ok = ok;
    Py_RETURN_NONE;
}
static PyObject *clear(PyObject *self, PyObject *unused) {
    for (int i = 0; i < 32; i++) { entries[i].obj = NULL; Py_CLEAR(entries[i].dtype); }
    reads = 0;
    Py_RETURN_NONE;
}
static PyObject *set_stream(PyObject *self, PyObject *args) {
    unsigned long long s;
    int ok;
    if (!PyArg_ParseTuple(args, "Ki", &s, &ok)) return NULL;
    stream = s;
    stream_ok = ok;
    Py_RETURN_NONE;
}
static PyObject *get_reads(PyObject *self, PyObject *unused) { return PyLong_FromLong(reads); }
static PyObject *capsule(PyObject *self, PyObject *args) {
    const char *kind, *name = THORK_ARRAY_READER_CAPSULE;
    if (!PyArg_ParseTuple(args, "s|s", &kind, &name)) return NULL;
    ThorkArrayReader *r = !strcmp(kind, "good") ? &good : !strcmp(kind, "raising") ? &raising
        : !strcmp(kind, "bad_abi") ? &bad_abi : !strcmp(kind, "small") ? &small : &no_fn;
    /* the name must outlive the capsule: only the two static names are used */
    return PyCapsule_New(r, strcmp(name, THORK_ARRAY_READER_CAPSULE) ? "another.name"
                                                                     : THORK_ARRAY_READER_CAPSULE,
                         NULL);
}
static PyMethodDef methods[] = {
    {"set_entry", set_entry, METH_VARARGS, ""}, {"clear", clear, METH_NOARGS, ""},
    {"set_stream", set_stream, METH_VARARGS, ""}, {"reads", get_reads, METH_NOARGS, ""},
    {"capsule", capsule, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "stand_in_reader", "", -1, methods,
                                 NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_stand_in_reader(void) { return PyModule_Create(&mod); }
"""


class Dtype:
    def __init__(self, name: str) -> None:
        self.name = name


T_F32, T_F64 = Dtype("float32"), Dtype("float64")


class Tensor:
    """An object of the registered type: everything about it is what the reader says."""


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    import shutil

    from thork_core.build import host_extension, python_flags
    from thork_core.launch import array_reader_include

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path_factory.mktemp("reader") / "stand_in_reader.c"
    src.write_text(_SOURCE)
    return host_extension("stand_in_reader", str(src), compiler=cc,
                          flags=[*python_flags(), "-Wall", "-Werror", "-Wno-unused-parameter",
                                 "-I", array_reader_include()])


class Reader:
    """The stand-in's answers, set per object."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        self.slots: dict[int, int] = {}

    def set(self, obj: Any, ptr: int, shape: tuple[int, ...] = (8,), dtype: Any = T_F32,
            device: tuple[int, int] = (2, 0), contiguous: bool = True,
            ok: bool = True) -> Any:
        i = self.slots.setdefault(id(obj), len(self.slots))
        self.mod.set_entry(i, obj, ptr, shape, dtype, device[0], device[1], int(contiguous),
                           int(ok))
        return obj


@pytest.fixture
def reader(native, stand_in):
    from thork import dt

    stand_in.clear()
    stand_in.set_stream(0, 1)
    native.foreign(Tensor, 2, stand_in.capsule("good"), {T_F32: dt.float32, T_F64: dt.float64})
    yield Reader(stand_in)
    from thork_core._probe import sync_native

    native.foreign()
    sync_native(native)
    stand_in.clear()


def test_what_the_reader_says_is_launched_on_its_current_stream(native, stand_in, reader):
    assert native.foreign_reading(Tensor) == "c"
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200, (4, 3, 5))
    stand_in.set_stream(0x77, 1)
    assert _run(b, (out, 1.5, x, 3))  # no stream given: the library's current one
    stand_in.set_stream(0x99, 1)  # switched between calls
    assert _run(b, (out, 1.5, x, 3))
    assert _run(b, (out, 1.5, x, 3), 0x99)  # given, and it is the current one
    assert not _run(b, (out, 1.5, x, 3), 0x42)  # another one: the caller waits, records
    assert [c["stream"] for c in rec.calls] == [0x77, 0x99, 0x99]
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)] * 3
    assert [c["scalars"] for c in rec.calls] == [(1.5, 3)] * 3


@pytest.mark.parametrize("change", ["pointer", "shape", "dtype", "not contiguous", "cpu",
                                    "other device", "unreadable"])
def test_changes_between_calls_are_seen(native, reader, change):
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200)
    assert _run(b, (out, 1.0, x, 3))
    if change == "pointer":  # set_: another storage, launched at its address
        reader.set(out, 0x900)
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x900, 0x200)
        return
    kw: dict[str, Any] = {
        "shape": {"shape": (2, 4)}, "dtype": {"dtype": T_F64},
        "not contiguous": {"contiguous": False}, "cpu": {"device": (1, 0)},
        "other device": {"device": (2, 1)}, "unreadable": {"ok": False}}[change]
    reader.set(out, 0x100, **kw)
    assert not _run(b, (out, 1.0, x, 3))
    assert len(rec.calls) == 1
    reader.set(out, 0x100)  # as it was: launched again
    assert _run(b, (out, 1.0, x, 3)) and len(rec.calls) == 2


def test_a_dtype_the_table_lacks_is_the_callers(native, reader):
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100, dtype=Dtype("int8")), reader.set(Tensor(), 0x200)
    assert not _run(b, (out, 1.0, x, 3))
    assert rec.calls == []


def test_each_argument_is_read_once_per_call(native, stand_in, reader):
    """The implied stream's read of the first argument and its own read are one read;
    any later read is made anew (the same object again included)."""
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200)
    before = stand_in.reads()
    for _ in range(10):
        assert _run(b, (out, 1.0, x, 3))
    assert stand_in.reads() - before == 20
    before = stand_in.reads()
    assert _run(b, (out, 1.0, out, 3))  # the same object twice: read for each
    assert stand_in.reads() - before == 2
    assert rec.calls[-1]["pointers"] == (0x100, 0x100)
    before = stand_in.reads()
    assert _run(b, (out, 1.0, x, 3), 0)  # a stream given: no implied read, one each
    assert stand_in.reads() - before == 2


def test_an_unreadable_stream_is_the_callers(native, stand_in, reader):
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200)
    stand_in.set_stream(0x77, 0)
    assert not _run(b, (out, 1.0, x, 3))
    assert not _run(b, (out, 1.0, x, 3), 0x77)
    assert rec.calls == []


def test_a_reader_that_raises_is_a_miss_with_nothing_left_set(native, stand_in, reader):
    from thork import dt

    native.foreign(Tensor, 2, stand_in.capsule("raising"), {T_F32: dt.float32})
    rec, b = make_binder(native, KINDS)
    out, x = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200)
    assert not _run(b, (out, 1.0, x, 3))
    assert not _run(b, (out, 1.0, x, 3), 0)
    assert rec.calls == []
    assert sys.exc_info() == (None, None, None)


@pytest.mark.parametrize("kind, match", [
    ("bad_abi", r"ABI 2 \(size \d+\) is not the 1"),
    ("small", r"ABI 1 \(size 8\) is not the 1"),
    ("no_fn", "both functions set"),
])
def test_a_reader_of_another_abi_is_refused(native, stand_in, reader, kind, match):
    from thork import dt

    with pytest.raises(ValueError, match=match):
        native.foreign(Tensor, 2, stand_in.capsule(kind), {T_F32: dt.float32})
    assert native.foreign_reading(Tensor) == "c"  # the good one registered before stays
    native.foreign(Tensor, 2, lambda d: 0, {T_F32: dt.float32})
    assert native.foreign_reading(Tensor) == "torch"  # replaced: read in Python again
    native.foreign()
    assert native.foreign_reading(Tensor) is None


def test_a_capsule_of_another_name_is_refused(native, stand_in, reader):
    from thork import dt

    with pytest.raises(ValueError, match="named 'another.name'"):
        native.foreign(Tensor, 2, stand_in.capsule("good", "x"), {T_F32: dt.float32})
    with pytest.raises(ValueError, match="style 1"):  # a reader is style 2's only
        native.foreign(Tensor, 1, stand_in.capsule("good"), None)


def test_eight_threads_each_on_its_own_current_stream(native, stand_in, reader):
    rec, b = make_binder(native, KINDS)
    pairs = [(reader.set(Tensor(), 0x10000 * (i + 1)),
              reader.set(Tensor(), 0x10000 * (i + 1) + 0x80, (3, 5))) for i in range(8)]

    def work(i: int) -> None:
        stand_in.set_stream(0x1000 + i, 1)  # the reader's stream is per thread
        out, x = pairs[i]
        for _ in range(300):
            assert _run(b, (out, 1.0, x, i))
            assert not _run(b, (out, 1.0, x, i), 0x5000)

    run_threads(work, 8, join_seconds=60)
    assert_thread_launches(rec, 8, 300)


def test_the_guard_reads_exact_shapes_each_call(native, reader):
    from thork import dt
    from thork_core._probe import KINDS

    rec = Recorder()
    g = rec.launch(native).guard(DeviceArray, [((8,), dt.float32, 0, "<f4", False, None),
                                               ((2, 4), dt.float32, 0, "<f4", True, None)],
                                 [0, 1], 0, lambda s: int(s), KINDS, False)
    x, y = reader.set(Tensor(), 0x100), reader.set(Tensor(), 0x200, (2, 4))
    assert g(x, y, None)
    reader.set(x, 0x100, (2, 4))  # resize_: same bytes, another shape
    assert not g(x, y, None)
    reader.set(x, 0x100, (8,))
    reader.set(y, 0x200, (4, 2))
    assert not g(x, y, None)
    reader.set(y, 0x200, (2, 4))
    assert g(x, y, None)
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)] * 2


def test_host_extension_builds_once_and_refuses_bad_source(tmp_path, monkeypatch):
    """The shared build path: a second call finds the library in the cache (no compile);
    a source the compiler rejects is a CompileError naming the file and the compiler's
    words; build=False finds nothing for a source never built."""
    import shutil

    from thork_core import CompileError
    from thork_core.build import host_extension, python_flags

    real = shutil.which("cc") or shutil.which("gcc")
    if real is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    cc = tmp_path / "cc-counting"  # the compiler, counting its runs
    cc.write_text(f'#!/bin/sh\necho run >> "{runs}"\nexec "{real}" "$@"\n')
    cc.chmod(0o755)
    src = tmp_path / "tiny.c"
    src.write_text('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT,'
                   ' "tiny", "", -1, NULL};\nPyMODINIT_FUNC PyInit_tiny(void) '
                   '{ return PyModule_Create(&m); }\n')
    assert host_extension("tiny", str(src), compiler=str(cc), flags=python_flags(),
                          build=False) is None
    assert not runs.exists()
    mod = host_extension("tiny", str(src), compiler=str(cc), flags=python_flags())
    assert mod is not None and mod.__name__ == "tiny"
    again = host_extension("tiny", str(src), compiler=str(cc), flags=python_flags())
    assert again is not None and again.__name__ == "tiny"
    assert runs.read_text().split() == ["run"]  # built once
    src.write_text(src.read_text() + "/* edited */\n")  # another source: built again
    assert host_extension("tiny", str(src), compiler=str(cc), flags=python_flags())
    assert runs.read_text().split() == ["run", "run"]
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C;\n")
    with pytest.raises(CompileError, match=r"building bad\.c: .*cc-counting failed: .*error"):
        host_extension("bad", str(bad), compiler=str(cc), flags=python_flags())
    assert not any(p.suffix == ".so" and "bad" in p.name for p in tmp_path.rglob("*"))


class _Mem:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _Stream:
    ptr = 0


class Meddler:
    """A CuPy-style array (read through Python attributes) whose contiguity read runs
    Python code that changes what the reader will say of another argument."""

    shape = (8,)
    ndim = 1

    def __init__(self, ptr: int, then: Any = None) -> None:
        import numpy as np

        self.data, self.dtype, self.then = _Mem(ptr), np.dtype(np.float32), then

    @property
    def _c_contiguous(self) -> bool:
        if self.then is not None:
            self.then()
        return True


def test_a_read_kept_across_python_code_is_read_again(native, stand_in, reader):
    """The implied stream reads the tensor x first; reading `out` before x runs Python
    code that moves x (set_): x's own read must see the new address, not the kept one."""
    native.foreign(Meddler, 1, _Stream, None)
    rec, b = make_binder(native, KINDS)
    x = reader.set(Tensor(), 0x200)
    out = Meddler(0x100, then=lambda: reader.set(x, 0x300))
    assert _run(b, (out, 1.0, x, 3))
    assert rec.calls[-1]["pointers"] == (0x100, 0x300)


def test_the_guard_reads_again_after_python_code_too(native, stand_in, reader):
    from thork import dt

    native.foreign(Meddler, 1, _Stream, None)
    rec = Recorder()
    g = rec.launch(native).guard(DeviceArray, [((8,), dt.float32, 0, "<f4", False, None),
                                               ((2, 4), dt.float32, 0, "<f4", True, None)],
                                 [0, 1], 0, lambda s: int(s), KINDS, False)
    y = reader.set(Tensor(), 0x200, (2, 4))
    x = Meddler(0x100, then=lambda: reader.set(y, 0x300, (2, 4)))
    assert g(x, y, None)
    assert rec.calls[-1]["pointers"] == (0x100, 0x300)


def test_host_extension_from_eight_threads_builds_once(tmp_path, monkeypatch):
    """Eight threads asking for the same extension at once: one compile (the cache's
    per-key build lock), and every thread gets a working module."""
    import shutil

    from thork_core.build import host_extension, python_flags

    real = shutil.which("cc") or shutil.which("gcc")
    if real is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    cc = tmp_path / "cc-counting"
    cc.write_text(f'#!/bin/sh\necho run >> "{runs}"\nexec "{real}" "$@"\n')
    cc.chmod(0o755)
    src = tmp_path / "shared_ext.c"
    src.write_text('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT,'
                   ' "shared_ext", "", -1, NULL};\nPyMODINIT_FUNC PyInit_shared_ext(void) '
                   '{ PyObject *mod = PyModule_Create(&m);\n'
                   '  PyModule_AddIntConstant(mod, "answer", 42); return mod; }\n')
    got: list[int] = []
    import threading

    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        mod = host_extension("shared_ext", str(src), compiler=str(cc), flags=python_flags())
        got.append(mod.answer)

    run_threads(work, 8, join_seconds=120)
    assert got == [42] * 8
    assert runs.read_text().split() == ["run"]
