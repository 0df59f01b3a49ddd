/*
 * _thork_native: Thork's one launcher, in C.
 *
 * Built on first use by thork_core/_native.py with the host C compiler against this
 * Python's headers, and cached; where that cannot be done Thork uses the Python launcher
 * in thork_core/_launch.py, which has the same interface and behaviour.
 *
 * Launcher(conv, fn, function, kinds, on_error, ctx=0, ctx_get=0, ctx_set=0)
 *     conv      how fn is called: 0 cuLaunchKernel(function, grid.., block.., shared,
 *               stream, params, NULL); 1 fn(params, grid[3], block[3], shared, stream)
 *               (nvcc host library); 2 fn(params, grid[3], block[3], shared) (CPU target)
 *     fn        the function's address; function: the CUfunction (conv 0)
 *     kinds     one struct-module code per kernel parameter: 'P' pointer, '?' bool,
 *               'b' 'h' 'i' 'q' signed and 'B' 'H' 'I' 'Q' unsigned integers (16-bit
 *               floats travel as 'H' bits), 'f' float32, 'd' float64
 *     on_error  called as on_error(code, grid, block) when fn returns non-zero (it raises)
 *     ctx       a CUcontext made current on the calling thread before each launch when it
 *               is not (ctx_get/ctx_set: cuCtxGetCurrent/cuCtxSetCurrent); 0: not needed
 *   .run(grid, block, shared, stream, values)   one launch; values: one per parameter
 *   .prepare(grid, block, shared, values) -> Prepared (scalars fixed, pointers per call)
 * Prepared
 *   .run(pointers, stream=0)   launch with these addresses in the pointer parameters
 *   .guard(array_type, specs, order, align_mask, to_handle) -> Guard
 *
 * Thread safety: no call writes shared state. Every launch builds its argument values and
 * the void* array pointing at them on its own C stack (a prepared launch's fixed scalars
 * are read, never written), so any number of threads may share one Launcher, Prepared or
 * Guard; the GIL is released around fn (as CuPy's launcher does: a launch can block on a
 * full queue, and the CPU target runs whole grids).
 *
 * Guard(*arrays, stream) -> bool
 *     True: every array is exactly array_type with the spec's shape, dtype (identity) and
 *     device, was produced on `stream` or the legacy stream (its `.stream` is 0 or the
 *     launch stream), and all addresses are clear of align_mask: the kernel was launched.
 *     False: something differs, nothing was launched, the caller takes its general path.
 *     stream: None (0), an int handle, or anything `to_handle` turns into one.
 *     Slot k of the kernel receives arrays[order[k]].
 *
 * Binder(launcher, array_type, device, specs, cai)
 *     binder(grid, block, shared, stream, args) -> bool: kernel[grid, block](*args) checked
 *     and launched in C when every argument is of a common kind (see its section).
 *
 * GuardedCall: a base type whose instances' call obj(x, out=y[, stream=s]) tries the Guard
 *     in obj._hot_guard in C and returns y when it launched; obj(x) / obj(x, stream=s)
 *     makes its output with the OutMaker in obj._hot_out, then tries the same guard;
 *     everything else (and a miss) goes to obj._miss(*args, **kw).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h> /* T_OBJECT_EX: the member type of a __slots__ entry */

#include "thork_array_reader.h" /* (session 19) a plugin's C reader of its arrays */
#ifdef Py_READONLY
#define ATTR_READONLY Py_READONLY
#else
#define ATTR_READONLY READONLY
#endif

typedef int (*cu_launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void *stream,
                            void **params, void **extra);
typedef int (*host_stream_fn)(void **params, const unsigned *grid, const unsigned *block,
                              unsigned shared, void *stream);
typedef int (*host_fn)(void **params, const unsigned *grid, const unsigned *block,
                       unsigned long long shared);
typedef int (*ctx_get_fn)(void **ctx);
typedef int (*ctx_set_fn)(void *ctx);

enum { CONV_CU = 0, CONV_HOST_STREAM = 1, CONV_HOST = 2 };

/* DLPack's structures (dlpack.h, ABI 1.x): the guard's, dlpack_read's and dlpack_export's. */
typedef struct { int32_t device_type, device_id; } DLDev;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLType;
typedef struct {
    void *data;
    DLDev device;
    int32_t ndim;
    DLType dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTens;
typedef struct { DLTens t; void *ctx; void (*deleter)(void *); } DLManaged;

/* What a foreign reader keeps of one pointer slot between calls ("Foreign readers"):
 * seen, the producer's dtype object that last matched (a reference; session 11); and
 * (session 16, CuPy-style readers only) ref, a weak reference to the array last read,
 * data, its data object then (a reference, dropped by ref's callback `forget` when the
 * array goes: nothing is kept alive longer than the array keeps it), ptr, that object's
 * pointer. See read_foreign for when ptr is taken from here. forget: the callback (made
 * once per slot; its self a capsule whose context is the slot, NULL once the slot is
 * gone, so a weak reference someone else kept alive calls nothing). */
typedef struct {
    PyObject *seen, *ref, *data, *forget;
    uint64_t ptr;
} ForeignSlot;

static void fslot_clear(ForeignSlot *c) {
    if (c->forget) PyCapsule_SetContext(PyCFunction_GET_SELF(c->forget), NULL);
    Py_CLEAR(c->seen);
    Py_CLEAR(c->ref);
    Py_CLEAR(c->data);
    Py_CLEAR(c->forget);
}
typedef struct {
    uint32_t major, minor;
    void *ctx;
    void (*deleter)(void *);
    uint64_t flags;
    DLTens t;
} DLManagedV;

/* The tensor of a DLPack capsule (borrowed: valid while the capsule lives): 2 for a
 * "dltensor_versioned" (DLPack 1.x: *major its ABI major, *readonly its read-only flag),
 * 1 for the legacy "dltensor" (writable; *major 0), 0 when the capsule has neither name. */
static int dl_tensor(PyObject *capsule, const DLTens **t, uint32_t *major, int *readonly) {
    /* session 12: the name read once (PyCapsule_IsValid then PyCapsule_GetPointer compared
     * it twice per name tried); GetPointer with that same name cannot fail but is checked */
    if (!PyCapsule_CheckExact(capsule)) return 0;
    const char *name = PyCapsule_GetName(capsule);
    if (!name) { /* an invalid capsule (NULL pointer): not a tensor */
        PyErr_Clear();
        return 0;
    }
    if (strcmp(name, "dltensor_versioned") == 0) {
        const DLManagedV *m = PyCapsule_GetPointer(capsule, name);
        if (!m) {
            PyErr_Clear();
            return 0;
        }
        *t = &m->t;
        *major = m->major;
        *readonly = (m->flags & 1) != 0; /* DLPACK_FLAG_BITMASK_READ_ONLY */
        return 2;
    }
    if (strcmp(name, "dltensor") == 0) {
        const DLManaged *m = PyCapsule_GetPointer(capsule, name);
        if (!m) {
            PyErr_Clear();
            return 0;
        }
        *t = &m->t;
        *major = 0;
        *readonly = 0;
        return 1;
    }
    return 0;
}

#define MAX_SLOTS 32     /* arrays of a Guard */
#define DL_MAX_DIMS 8    /* a DLPack slot's shape kept as C ints up to this rank */
/* (session 12) The state of a Guard's kinds table (thork_core._probe.KINDS): a Guard
 * remembers per DLPack slot the type last found mapped to "dlpack" and this tag then, and
 * looks the table up again when the tag moved. Any change of the table moves it: Python
 * 3.12+ watches the table (a dict watcher bumps kinds_epoch on every mutation, however
 * made: kind_of, forget_kinds, a test's monkeypatch); 3.10 and 3.11 read the dict's own
 * version tag, which CPython changes on every mutation. 0: unknown (nothing remembered). */
#if PY_VERSION_HEX >= 0x030C0000
static uint64_t kinds_epoch = 1;
static int kinds_watcher = -1; /* PyDict_AddWatcher's id; -1: none could be had */
static int kinds_changed(PyDict_WatchEvent event, PyObject *dict, PyObject *key,
                         PyObject *value) {
    (void)event;
    (void)dict;
    (void)key;
    (void)value;
    kinds_epoch++;
    return 0;
}
static inline uint64_t kinds_tag(PyObject *kinds, int watched) {
    (void)kinds;
    return watched ? kinds_epoch : 0;
}
/* Watch `kinds` (a Guard's table, at the Guard's making): 1 when watched, 0 when it
 * cannot be (no watcher; another interpreter, whose watcher ids are its own): that Guard
 * then looks the table up on every call. Nothing raised. */
static int kinds_watch(PyObject *kinds) {
    if (kinds_watcher < 0) return 0;
    if (PyDict_Watch(kinds_watcher, kinds) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}
#else
static inline uint64_t kinds_tag(PyObject *kinds, int watched) {
    (void)watched;
    return ((PyDictObject *)kinds)->ma_version_tag;
}
static int kinds_watch(PyObject *kinds) {
    (void)kinds;
    return 1; /* the version tag needs no watching */
}
#endif
#define MAX_PARAMS 1024  /* kernel parameters (CUDA's own limit is 4 KiB of them) */

static PyObject *s_shape, *s_dtype, *s_device, *s_ptr, *s_stream;
static PyObject *s_cai, *s_typestr, *s_strides, *s_data, *s_mask, *s_kind_cai;
static PyObject *s_kind_dlpack, *s_dlpack, *s_dlpack_device, *s_dlpack_kw, *s_max_version;
static PyObject *s_dl_cuda, *s_dl_managed; /* 2 and 13: kDLCUDA, kDLCUDAManaged */
static PyObject *s_str;
static PyObject *s_zero; /* 0: a DeviceArray's stream when made on the legacy stream */

/* An attribute of the guarded array type: read straight from its __slots__ offset when the
 * type's attribute is a slot (exact type is checked before any read), else by getattr. */
typedef struct {
    PyObject *name;
    Py_ssize_t offset; /* -1: not a plain slot */
} Field;

enum { F_SHAPE, F_DTYPE, F_DEVICE, F_STREAM, F_PTR, N_FIELDS };

static void field_init(Field *f, PyTypeObject *type, PyObject *name) {
    f->name = name;
    f->offset = -1;
    PyObject *d = _PyType_Lookup(type, name); /* borrowed */
    if (d && Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX) f->offset = m->offset;
    }
}

/* New reference, or NULL with an exception (an unset slot: AttributeError). */
static inline PyObject *field_get(PyObject *a, const Field *f) {
    if (f->offset >= 0) {
        PyObject *v = *(PyObject **)((char *)a + f->offset);
        if (!v) {
            PyErr_SetObject(PyExc_AttributeError, f->name);
            return NULL;
        }
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetAttr(a, f->name);
}

/* (session 17) The same read without a reference of its own where the field is a slot:
 * the value is borrowed from `a` and stays valid until Python code runs (the caller runs
 * none before it is done with it). *own: NULL, or the new reference of a getattr read,
 * which the caller releases (Py_XDECREF). NULL with an exception as field_get. */
static inline PyObject *field_peek(PyObject *a, const Field *f, PyObject **own) {
    *own = NULL;
    if (f->offset >= 0) {
        PyObject *v = *(PyObject **)((char *)a + f->offset);
        if (!v) PyErr_SetObject(PyExc_AttributeError, f->name);
        return v;
    }
    return *own = PyObject_GetAttr(a, f->name);
}

/* ---- Launcher --------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    int conv;
    void *fn, *function, *ctx;
    ctx_get_fn ctx_get;
    ctx_set_fn ctx_set;
    Py_ssize_t nparams;
    char kinds[MAX_PARAMS];
    PyObject *on_error;
} LauncherObject;

typedef struct {
    PyObject_HEAD
    LauncherObject *launcher;
    unsigned grid[3], block[3], shared;
    uint64_t values[MAX_PARAMS]; /* fixed scalars (pointer entries unused) */
    Py_ssize_t nslots;
    Py_ssize_t slot_index[MAX_PARAMS]; /* the parameter of each pointer, in order */
} PreparedObject;

typedef struct {
    PyObject_HEAD
    PreparedObject *launch;
    PyTypeObject *array_type;
    Py_ssize_t n;
    PyObject *shapes[MAX_SLOTS];
    PyObject *dtypes[MAX_SLOTS];
    PyObject *device;
    Py_ssize_t order[MAX_SLOTS];
    uint64_t mask;
    PyObject *to_handle;
    Field fields[N_FIELDS];
    vectorcallfunc vectorcall;
    /* CAI arrays (kinds != NULL): per array the typestr accepted (NULL: none), whether the
     * kernel writes it, its size in bytes (the overlap rule); in_place: a written array
     * may be exactly a read one. */
    PyObject *kinds;
    PyObject *typestrs[MAX_SLOTS];
    int writes[MAX_SLOTS];
    uint64_t nbytes[MAX_SLOTS];
    int in_place;
    /* DLPack-only producers (types kinds maps to "dlpack"): per array the DLPack
     * (code << 8 | bits) accepted, -1: none; device_id: the CUDA ordinal they must name. */
    int dlcodes[MAX_SLOTS];
    long device_id;
    /* (session 12) DLPack slots: the spec's shape as C ints (dl_ndim[i] -1: not kept, the
     * tuple is read); the type last found mapped to "dlpack" in kinds (a reference) and
     * kinds_tag(kinds) then (the table is looked up again once it changed);
     * device_obj: device_id as an int object (a producer's small ints are CPython's
     * cached ones: compared by identity before converting). */
    int dl_ndim[MAX_SLOTS];
    int64_t dl_dims[MAX_SLOTS][DL_MAX_DIMS];
    PyTypeObject *dl_type[MAX_SLOTS];
    uint64_t dl_tag[MAX_SLOTS];
    PyObject *device_obj;
    int kinds_watched; /* kinds_watch's answer: 0, no remembered types */
    /* foreign readers: what each slot keeps (session 11, 16) */
    ForeignSlot fslot[MAX_SLOTS];
    /* DeviceArrays: the shape tuple each slot last matched (immutable: the same object is
     * equal again without comparing it entry by entry; session 11) */
    PyObject *shape_seen[MAX_SLOTS];
} GuardObject;

static PyTypeObject LauncherType;
static PyTypeObject PreparedType;
static PyTypeObject GuardType;

static int read_dims(PyObject *seq, unsigned out[3], const char *name) {
    if (PyTuple_CheckExact(seq) && PyTuple_GET_SIZE(seq) == 3) { /* the common case */
        for (int i = 0; i < 3; i++) {
            PyObject *o = PyTuple_GET_ITEM(seq, i);
            unsigned long v = PyLong_Check(o) ? PyLong_AsUnsignedLong(o) : 0;
            if (PyErr_Occurred()) PyErr_Clear();
            if (v == 0 || v > 0xffffffffUL) goto slow;
            out[i] = (unsigned)v;
        }
        return 0;
    }
slow:;
    PyObject *fast = PySequence_Fast(seq, name);
    if (!fast) return -1;
    if (PySequence_Fast_GET_SIZE(fast) != 3) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: expected 3 dimensions", name);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred() || v == 0 || v > 0xffffffffUL) {
            Py_DECREF(fast);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: dimensions must be 1..2**32-1", name);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    Py_DECREF(fast);
    return 0;
}

static void *as_address(PyObject *o) {
    /* A non-negative int up to 2**64-1 as a pointer. */
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    return (void *)(uintptr_t)v;
}

static int valid_kind(char k) { return k && strchr("P?bhiqBHIQfd", k) != NULL; }

/* Convert value v for a parameter of kind k into the 8-byte slot (little-endian bytes of
 * the C type, the rest zero). -1 with an exception when it does not fit. */
static int put(char k, PyObject *v, uint64_t *slot) {
    *slot = 0;
    if (k == 'f' || k == 'd') {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        if (k == 'f') {
            float f = (float)d;
            memcpy(slot, &f, 4);
        } else {
            memcpy(slot, &d, 8);
        }
        return 0;
    }
    if (k == '?') {
        int t = PyObject_IsTrue(v);
        if (t < 0) return -1;
        *(uint8_t *)slot = (uint8_t)t;
        return 0;
    }
    if (k == 'P' || k == 'Q' || k == 'B' || k == 'H' || k == 'I') {
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        unsigned long long lim = k == 'B' ? 0xffULL : k == 'H' ? 0xffffULL
                               : k == 'I' ? 0xffffffffULL : ~0ULL;
        if (x > lim) goto range;
        memcpy(slot, &x, k == 'B' ? 1 : k == 'H' ? 2 : k == 'I' ? 4 : 8);
        return 0;
    }
    {
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        int bytes = k == 'b' ? 1 : k == 'h' ? 2 : k == 'i' ? 4 : 8;
        if (bytes < 8) {
            long long hi = (1LL << (8 * bytes - 1)) - 1;
            if (x > hi || x < -hi - 1) goto range;
        }
        memcpy(slot, &x, (size_t)bytes);
        return 0;
    }
range:
    PyErr_Format(PyExc_OverflowError, "value out of range for a '%c' parameter", k);
    return -1;
}

static int launcher_init(LauncherObject *self, PyObject *args, PyObject *kw) {
    PyObject *fn, *function, *on_error, *ctx = NULL, *ctx_get = NULL, *ctx_set = NULL;
    const char *kinds;
    Py_ssize_t nkinds;
    int conv;
    static char *names[] = {"conv", "fn", "function", "kinds", "on_error", "ctx", "ctx_get",
                            "ctx_set", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOs#O|OOO", names, &conv, &fn, &function,
                                     &kinds, &nkinds, &on_error, &ctx, &ctx_get, &ctx_set))
        return -1;
    /* (session 17) once only: a Binder or Prepared sized by these kinds may hold it, and a
     * launch with fewer values than the new kinds name would hand the entry stray ones */
    if (self->fn) {
        PyErr_SetString(PyExc_TypeError, "Launcher is already initialized: make a new one");
        return -1;
    }
    if (conv < CONV_CU || conv > CONV_HOST) {
        PyErr_Format(PyExc_ValueError, "conv: 0, 1 or 2, got %d", conv);
        return -1;
    }
    void *f = as_address(fn);
    if (PyErr_Occurred()) return -1;
    if (!f) {
        PyErr_SetString(PyExc_ValueError, "fn: a non-null function address is required");
        return -1;
    }
    void *function_p = as_address(function);
    void *ctx_p = ctx ? as_address(ctx) : NULL;
    void *get_p = ctx_get ? as_address(ctx_get) : NULL;
    void *set_p = ctx_set ? as_address(ctx_set) : NULL;
    if (PyErr_Occurred()) return -1;
    if (ctx_p && (!get_p || !set_p)) {
        PyErr_SetString(PyExc_ValueError, "ctx needs ctx_get and ctx_set");
        return -1;
    }
    if (nkinds > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "kinds: at most %d parameters, got %zd", MAX_PARAMS,
                     nkinds);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nkinds; i++)
        if (!valid_kind(kinds[i])) {
            PyErr_Format(PyExc_ValueError, "kinds: unknown parameter kind '%c' at %zd",
                         kinds[i], i);
            return -1;
        }
    if (!PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "on_error must be callable");
        return -1;
    }
    self->conv = conv;
    self->fn = f;
    self->function = function_p;
    self->ctx = ctx_p;
    self->ctx_get = (ctx_get_fn)get_p;
    self->ctx_set = (ctx_set_fn)set_p;
    self->nparams = nkinds;
    memcpy(self->kinds, kinds, (size_t)nkinds);
    Py_INCREF(on_error);
    Py_XSETREF(self->on_error, on_error);
    return 0;
}

static void launcher_dealloc(LauncherObject *self) {
    Py_XDECREF(self->on_error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(LauncherObject *self) {
    if (self && self->fn) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Launcher was not initialized");
    return 0;
}

/* Whether the calling thread is the only Python thread state of the only interpreter:
 * then no other thread can be waiting for the GIL, and a launch keeps it (releasing and
 * taking it back is two mutex round trips and a condition signal per call: ~25% of the
 * hot call's own instructions under callgrind, session 11). A thread that appears while
 * the launch runs waits for it (microseconds; longer only while the driver's queue is
 * full). Any other thread state, even one blocked in C, makes the launch release it. */
static inline int alone(void) {
    /* (session 17) Asked without the caller's own thread state (a thread-local read and
     * two calls): the caller holds the GIL, so it has a thread state in an interpreter;
     * when there is one interpreter holding one thread state, that one is the caller's. */
    PyInterpreterState *is = PyInterpreterState_Head();
    if (PyInterpreterState_Next(is) != NULL) return 0;
    PyThreadState *head = PyInterpreterState_ThreadHead(is);
    return head != NULL && PyThreadState_Next(head) == NULL;
}

/* The launch itself: params (on the caller's stack) point at the caller's values. */
static PyObject *call_fn(LauncherObject *l, const unsigned grid[3], const unsigned block[3],
                         unsigned shared, void *stream, void **params) {
    int err = 0;
    PyThreadState *saved = alone() ? NULL : PyEval_SaveThread();
    if (l->ctx) { /* make the context current on this thread (cheap when it is) */
        void *cur = NULL;
        if (l->ctx_get(&cur) != 0 || cur != l->ctx) err = l->ctx_set(l->ctx);
    }
    if (!err) {
        if (l->conv == CONV_CU)
            err = ((cu_launch_fn)l->fn)(l->function, grid[0], grid[1], grid[2], block[0],
                                        block[1], block[2], shared, stream, params, NULL);
        else if (l->conv == CONV_HOST_STREAM)
            err = ((host_stream_fn)l->fn)(params, grid, block, shared, stream);
        else
            err = ((host_fn)l->fn)(params, grid, block, shared);
    }
    if (saved) PyEval_RestoreThread(saved);
    if (err) {
        PyObject *r = PyObject_CallFunction(l->on_error, "i(III)(III)", err, grid[0], grid[1],
                                            grid[2], block[0], block[1], block[2]);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static int read_stream(PyObject *o, void **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    *out = as_address(o);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *launcher_run(LauncherObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "run(grid, block, shared, stream, values)");
        return NULL;
    }
    unsigned grid[3], block[3];
    if (read_dims(args[0], grid, "grid") || read_dims(args[1], block, "block")) return NULL;
    unsigned long shared = PyLong_AsUnsignedLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    void *stream;
    if (read_stream(args[3], &stream)) return NULL;
    PyObject *fast = PySequence_Fast(args[4], "values must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n != self->nparams) {
        PyErr_Format(PyExc_ValueError, "values: %zd expected (one per parameter), got %zd",
                     self->nparams, n);
        Py_DECREF(fast);
        return NULL;
    }
    uint64_t vals[MAX_PARAMS];
    void *params[MAX_PARAMS];
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (put(self->kinds[i], items[i], &vals[i])) {
            Py_DECREF(fast);
            return NULL;
        }
        params[i] = &vals[i];
    }
    Py_DECREF(fast);
    return call_fn(self, grid, block, (unsigned)shared, stream, params);
}

static PyObject *launcher_prepare(LauncherObject *self, PyObject *const *args,
                                  Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "prepare(grid, block, shared, values)");
        return NULL;
    }
    PreparedObject *p = PyObject_New(PreparedObject, &PreparedType);
    if (!p) return NULL;
    Py_INCREF(self);
    p->launcher = self;
    p->nslots = 0;
    PyObject *fast = NULL;
    if (read_dims(args[0], p->grid, "grid") || read_dims(args[1], p->block, "block"))
        goto fail;
    p->shared = (unsigned)PyLong_AsUnsignedLong(args[2]);
    if (PyErr_Occurred()) goto fail;
    fast = PySequence_Fast(args[3], "values must be a sequence");
    if (!fast) goto fail;
    if (PySequence_Fast_GET_SIZE(fast) != self->nparams) {
        PyErr_Format(PyExc_ValueError, "values: %zd expected (one per parameter), got %zd",
                     self->nparams, PySequence_Fast_GET_SIZE(fast));
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nparams; i++) {
        if (self->kinds[i] == 'P') {
            p->slot_index[p->nslots++] = i;
            p->values[i] = 0;
        } else if (put(self->kinds[i], PySequence_Fast_GET_ITEM(fast, i), &p->values[i])) {
            goto fail;
        }
    }
    Py_DECREF(fast);
    return (PyObject *)p;
fail:
    Py_XDECREF(fast);
    Py_DECREF(p);
    return NULL;
}

static PyMethodDef launcher_methods[] = {
    {"run", (PyCFunction)(void (*)(void))launcher_run, METH_FASTCALL,
     "run(grid, block, shared, stream, values): one launch, every value converted here."},
    {"prepare", (PyCFunction)(void (*)(void))launcher_prepare, METH_FASTCALL,
     "prepare(grid, block, shared, values) -> Prepared (scalars fixed; pointers per call)"},
    {NULL, NULL, 0, NULL}};

static PyObject *launcher_nparams(LauncherObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->nparams);
}

static PyGetSetDef launcher_getset[] = {
    {"nparams", (getter)launcher_nparams, NULL, "number of kernel parameters", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Launcher",
    .tp_basicsize = sizeof(LauncherObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One kernel's launcher: fixed function and parameter kinds.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_methods = launcher_methods,
    .tp_getset = launcher_getset,
};

/* ---- Prepared --------------------------------------------------------------------- */

/* Launch with vals[k] as pointer parameter k (vals lives on the caller's stack). */
static PyObject *do_launch(PreparedObject *p, uint64_t *vals, void *stream) {
    LauncherObject *l = p->launcher;
    void *params[MAX_PARAMS];
    for (Py_ssize_t i = 0; i < l->nparams; i++) params[i] = &p->values[i];
    for (Py_ssize_t k = 0; k < p->nslots; k++) params[p->slot_index[k]] = &vals[k];
    return call_fn(l, p->grid, p->block, p->shared, stream, params);
}

static void prepared_dealloc(PreparedObject *p) {
    Py_XDECREF((PyObject *)p->launcher);
    PyObject_Free(p);
}

static int prepared_ready(PreparedObject *p) { return ready(p->launcher); }

static PyObject *prepared_run(PreparedObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!prepared_ready(self)) return NULL;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "run(pointers, stream=0)");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(args[0], "pointers must be a sequence of addresses");
    if (!fast) return NULL;
    if (PySequence_Fast_GET_SIZE(fast) != self->nslots) {
        PyErr_Format(PyExc_ValueError, "pointers: %zd addresses expected, got %zd",
                     self->nslots, PySequence_Fast_GET_SIZE(fast));
        Py_DECREF(fast);
        return NULL;
    }
    uint64_t vals[MAX_PARAMS];
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        vals[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    void *stream = NULL;
    if (nargs == 2 && read_stream(args[1], &stream)) return NULL;
    return do_launch(self, vals, stream);
}

static PyObject *prepared_guard(PreparedObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *guard_call(GuardObject *g, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames);

static PyMethodDef prepared_methods[] = {
    {"run", (PyCFunction)(void (*)(void))prepared_run, METH_FASTCALL,
     "run(pointers, stream=0): launch with these addresses in the pointer parameters."},
    {"guard", (PyCFunction)(void (*)(void))prepared_guard, METH_FASTCALL,
     "guard(array_type, specs, order, align_mask, to_handle) -> Guard"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject PreparedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Prepared",
    .tp_basicsize = sizeof(PreparedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A prepared launch: fixed geometry and scalars, addresses per call.",
    .tp_dealloc = (destructor)prepared_dealloc,
    .tp_methods = prepared_methods,
};

/* ---- Guard ---------------------------------------------------------------------- */

static PyObject *guard_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    return guard_call((GuardObject *)self, args, nargsf, kwnames);
}

static PyObject *prepared_guard(PreparedObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!prepared_ready(self)) return NULL;
    if (self->nslots > MAX_SLOTS) {
        PyErr_Format(PyExc_ValueError, "guard: at most %d pointer parameters, got %zd",
                     MAX_SLOTS, self->nslots);
        return NULL;
    }
    if (nargs != 5 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "guard(array_type, specs, order, align_mask, to_handle[, kinds, "
                        "in_place])");
        return NULL;
    }
    PyObject *kinds = nargs == 7 && args[5] != Py_None ? args[5] : NULL;
    if (kinds && !PyDict_Check(kinds)) {
        PyErr_SetString(PyExc_TypeError, "kinds must be a dict (thork_core._probe.KINDS)");
        return NULL;
    }
    PyObject *array_type = args[0], *specs = args[1], *order = args[2];
    if (!PyType_Check(array_type)) {
        PyErr_SetString(PyExc_TypeError, "array_type must be a type");
        return NULL;
    }
    if (!PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "to_handle must be callable");
        return NULL;
    }
    GuardObject *g = PyObject_New(GuardObject, &GuardType);
    if (!g) return NULL;
    g->vectorcall = guard_vectorcall;
    g->n = 0;
    g->device = NULL;
    g->to_handle = NULL;
    g->array_type = NULL;
    g->kinds = NULL;
    g->in_place = 0;
    g->device_id = -1;
    for (int i = 0; i < MAX_SLOTS; i++) {
        g->typestrs[i] = NULL;
        g->writes[i] = 0;
        g->nbytes[i] = 0;
        g->dlcodes[i] = -1;
        memset(&g->fslot[i], 0, sizeof g->fslot[i]);
        g->shape_seen[i] = NULL;
        g->dl_ndim[i] = -1;
        g->dl_type[i] = NULL;
        g->dl_tag[i] = 0;
    }
    g->device_obj = NULL;
    g->kinds_watched = 0;
    Py_INCREF(self);
    g->launch = self;
    PyObject *fs = PySequence_Fast(specs, "specs must be a sequence of (shape, dtype, device)");
    PyObject *fo = fs ? PySequence_Fast(order, "order must be a sequence of indices") : NULL;
    if (!fs || !fo) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fs);
    if (n < 1 || n > MAX_SLOTS) {
        PyErr_Format(PyExc_ValueError, "specs: 1..%d arrays, got %zd", MAX_SLOTS, n);
        goto fail;
    }
    if (PySequence_Fast_GET_SIZE(fo) != self->nslots) {
        PyErr_Format(PyExc_ValueError, "order: %zd entries expected (one per pointer slot), "
                     "got %zd", self->nslots, PySequence_Fast_GET_SIZE(fo));
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *spec = PySequence_Fast_GET_ITEM(fs, i);
        PyObject *shape, *dtype, *device, *typestr = Py_None, *dlcode = Py_None;
        int writes = 0;
        if (!PyTuple_Check(spec) ||
            !PyArg_ParseTuple(spec, "OOO|OpO", &shape, &dtype, &device, &typestr, &writes,
                              &dlcode)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "specs: each entry is (shape, dtype, device"
                                "[, typestr, writes, dlpack code])");
            goto fail;
        }
        if (dlcode != Py_None && PyTuple_Check(shape)) { /* DLPack: a tuple shape only */
            long c = PyLong_AsLong(dlcode);
            if (PyErr_Occurred()) goto fail;
            g->dlcodes[i] = (int)c;
            Py_ssize_t nd = PyTuple_GET_SIZE(shape);
            if (nd <= DL_MAX_DIMS) { /* else the tuple is read per call */
                int all = 1;
                for (Py_ssize_t d = 0; d < nd && all; d++) {
                    PyObject *e = PyTuple_GET_ITEM(shape, d);
                    long long v = PyLong_Check(e) ? PyLong_AsLongLong(e) : -1;
                    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
                    if (v < 0) all = 0; /* not an extent: the tuple's compare says so */
                    else g->dl_dims[i][d] = v;
                }
                if (all) g->dl_ndim[i] = (int)nd;
            }
        }
        Py_INCREF(shape);
        Py_INCREF(dtype);
        g->shapes[i] = shape;
        g->dtypes[i] = dtype;
        g->n = i + 1;
        g->writes[i] = writes;
        if (typestr != Py_None) {
            if (!PyUnicode_Check(typestr)) {
                PyErr_SetString(PyExc_TypeError, "specs: typestr must be a str or None");
                goto fail;
            }
            Py_INCREF(typestr);
            g->typestrs[i] = typestr;
        }
        if (kinds) { /* bytes = itemsize x the shape's elements (the overlap rule) */
            PyObject *isz = PyObject_GetAttrString(dtype, "itemsize");
            if (!isz) goto fail;
            uint64_t nb = PyLong_AsUnsignedLongLong(isz);
            Py_DECREF(isz);
            if (PyErr_Occurred()) goto fail;
            PyObject *fsh = PySequence_Fast(shape, "specs: shape must be a sequence");
            if (!fsh) goto fail;
            for (Py_ssize_t d = 0; d < PySequence_Fast_GET_SIZE(fsh); d++) {
                uint64_t e = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fsh, d));
                if (PyErr_Occurred()) {
                    Py_DECREF(fsh);
                    goto fail;
                }
                nb *= e;
            }
            Py_DECREF(fsh);
            g->nbytes[i] = nb;
        }
        if (i == 0) {
            Py_INCREF(device);
            g->device = device;
            if (PyLong_Check(device)) {
                g->device_id = PyLong_AsLong(device);
                if (PyErr_Occurred()) goto fail;
                g->device_obj = PyLong_FromLong(g->device_id);
                if (!g->device_obj) goto fail;
            }
        }
    }
    for (Py_ssize_t k = 0; k < self->nslots; k++) {
        Py_ssize_t j = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fo, k));
        if (PyErr_Occurred()) goto fail;
        if (j < 0 || j >= n) {
            PyErr_Format(PyExc_ValueError, "order: index %zd outside 0..%zd", j, n - 1);
            goto fail;
        }
        g->order[k] = j;
    }
    g->mask = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) goto fail;
    Py_INCREF(array_type);
    g->array_type = (PyTypeObject *)array_type;
    field_init(&g->fields[F_SHAPE], g->array_type, s_shape);
    field_init(&g->fields[F_DTYPE], g->array_type, s_dtype);
    field_init(&g->fields[F_DEVICE], g->array_type, s_device);
    field_init(&g->fields[F_STREAM], g->array_type, s_stream);
    field_init(&g->fields[F_PTR], g->array_type, s_ptr);
    Py_INCREF(args[4]);
    g->to_handle = args[4];
    if (kinds) {
        int ip = PyObject_IsTrue(args[6]);
        if (ip < 0) goto fail;
        g->in_place = ip;
        g->kinds_watched = kinds_watch(kinds);
        Py_INCREF(kinds);
        g->kinds = kinds;
    }
    Py_DECREF(fs);
    Py_DECREF(fo);
    return (PyObject *)g;
fail:
    Py_XDECREF(fs);
    Py_XDECREF(fo);
    Py_DECREF(g);
    return NULL;
}

static void guard_dealloc(GuardObject *g) {
    for (Py_ssize_t i = 0; i < g->n; i++) {
        Py_DECREF(g->shapes[i]);
        Py_DECREF(g->dtypes[i]);
        Py_XDECREF(g->typestrs[i]);
    }
    for (int i = 0; i < MAX_SLOTS; i++) {
        fslot_clear(&g->fslot[i]);
        Py_XDECREF(g->shape_seen[i]);
        Py_XDECREF((PyObject *)g->dl_type[i]);
    }
    Py_XDECREF(g->device_obj);
    Py_XDECREF(g->kinds);
    Py_XDECREF(g->device);
    Py_XDECREF(g->to_handle);
    Py_XDECREF((PyObject *)g->array_type);
    Py_XDECREF((PyObject *)g->launch);
    PyObject_Free(g);
}

/* 1 equal, 0 not, -1 error; identity first (interned small ints, the same tuple). */
static int same(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* same(v, want) for a shape `want` (an exact tuple, the spec's): where v's comparison is
 * the tuple's own (a tuple, or a subclass that keeps it: torch.Size), its loop inlined:
 * the sizes, then each pair by identity (interned small ints) before comparing them, as
 * tuple's == does (session 12: ~170 instructions of generic dispatch per read shape, a
 * CuPy array's being a new tuple each read). 1 equal, 0 not, -1 error. */
static int same_shape(PyObject *v, PyObject *want) {
    if (v == want) return 1;
    if (!PyTuple_CheckExact(want) || !PyTuple_Check(v) ||
        Py_TYPE(v)->tp_richcompare != PyTuple_Type.tp_richcompare)
        return PyObject_RichCompareBool(v, want, Py_EQ);
    Py_ssize_t n = PyTuple_GET_SIZE(want);
    if (PyTuple_GET_SIZE(v) != n) return 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *a = PyTuple_GET_ITEM(v, d), *b = PyTuple_GET_ITEM(want, d);
        if (a == b) continue;
        int r = PyObject_RichCompareBool(a, b, Py_EQ);
        if (r <= 0) return r;
    }
    return 1;
}

static int is_default_stream(PyObject *s);

/* ---- Foreign readers (session 11) ---------------------------------------------------
 * foreign(type, style, current, dtypes) tells the Binder and the Guard (where they read
 * foreign arrays at all: the Binder given the kinds table, a Guard spec with a typestr,
 * i.e. one visible GPU) how to read arrays of exactly `type` with the producer's own
 * attributes instead of its __cuda_array_interface__ dict (which CuPy builds per read,
 * environment lookup included, and torch builds in Python). foreign() forgets them all;
 * thork_core._probe registers a type once its kind is decided (and forgets with it).
 *   style 1 (CuPy's ndarray): a._c_contiguous (the flag CuPy's own interface reads; a
 *     no-copy reshape through the shape setter keeps it exact), a.dtype (the numpy dtype:
 *     its .str must be the spec's typestr; the last dtype object that matched is kept
 *     per slot and compared by identity), a.data (each call) and its .ptr (re-read
 *     unless the slot's last array is `a` again with the same data object and .ptr is
 *     read-only in C: session 16, see read_foreign), a.shape (exact shape
 *     specs) or a.ndim (ndim specs). The producer stream, read once per call: a default
 *     stream (0, 1, 2) or the launch stream, as for the interface. `current` is CuPy's
 *     get_current_stream (a stream object whose .ptr is read, or an int), or (session
 *     16) a capsule of a C function `intptr_t (void)` answering the same handle (CuPy's
 *     own C API, cupy_backends.cuda.stream.__pyx_capi__["get_current_stream_ptr"], which
 *     cupy.cuda.stream's answers from: no Python call, no stream object, no int). The
 *     capsule's name is its C signature (Cython names exports so); any other name is
 *     refused (ValueError), and the caller registers the Python function instead. A call
 *     that leaves a Python error set is the caller's path, as an unreadable stream
 *     object is.
 *   style 2 (torch.Tensor, a library with a current stream): a.is_cuda (on the one GPU:
 *     the spec's device), a.dtype (dtypes[a.dtype] must be the spec's DType), a.is_contiguous(),
 *     a.data_ptr(), a.shape / a.dim(): every one re-read each call (set_, resize_ and
 *     .data = change any of them). current(device) is the raw handle of the library's
 *     current stream (read once per call): a call given no stream launches there (as the
 *     Python path does); a call given another stream goes to the caller (which waits and
 *     records the use).
 * Nothing of an array object is kept between calls but the matched dtype objects and,
 * for style 1, a weak reference with its data object's address and pointer. */
enum { FX_CUPY = 1, FX_TORCH = 2 };

/* (session 12) One attribute of a producer's type read without the generic lookup: where
 * the type's attribute lookup is the generic one and the name is a data descriptor of the
 * type (a C getset, e.g. Cython's cdef readonly attributes, or a C member), its getter is
 * called directly: what PyObject_GetAttr does for such a name, less the type's MRO
 * lookup and the dispatch (~100-150 instructions of ~190 per read). A data descriptor
 * wins over any instance attribute, so only the type matters: the resolution holds while
 * the type keeps the version tag it had then (CPython gives a modified type, or one whose
 * base was modified, a new tag). Anything else (another type, a property, a method, no
 * valid tag) reads through PyObject_GetAttr. Nothing of an instance is kept. */
typedef struct {
    PyObject *name;     /* interned, borrowed from the module's names */
    PyTypeObject *type; /* the type last resolved (a reference), NULL: none */
    PyObject *descr;    /* its descriptor (a reference), NULL: not direct */
    unsigned int tag;   /* type->tp_version_tag at resolution, 0: not direct */
    getter get;
    void *closure;
    PyMemberDef *member;
    int readonly; /* direct and the descriptor has no setter (session 16) */
} Attr;

static void attr_init(Attr *c, PyObject *name) {
    memset(c, 0, sizeof *c);
    c->name = name;
}

static void attr_release(Attr *c) {
    Py_CLEAR(c->type);
    Py_CLEAR(c->descr);
    c->tag = 0;
}

static void attr_resolve(Attr *c, PyTypeObject *tp) {
    attr_release(c);
    c->get = NULL;
    c->member = NULL;
    c->readonly = 0;
    c->type = (PyTypeObject *)Py_NewRef((PyObject *)tp);
    if (tp->tp_getattro != PyObject_GenericGetAttr) return;
    PyObject *d = _PyType_Lookup(tp, c->name); /* borrowed; gives the type a tag */
    if (!d || tp->tp_version_tag == 0) return;
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) return;
#endif
    if (Py_TYPE(d) == &PyGetSetDescr_Type) {
        PyGetSetDef *gs = ((PyGetSetDescrObject *)d)->d_getset;
        if (!gs->get) return;
        c->get = gs->get;
        c->closure = gs->closure;
        c->readonly = gs->set == NULL;
    } else if (Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
#ifdef Py_AUDIT_READ
        if (m->flags & Py_AUDIT_READ) return;
#elif defined(PY_AUDIT_READ)
        if (m->flags & PY_AUDIT_READ) return;
#endif
        c->member = m;
        c->readonly = (m->flags & ATTR_READONLY) != 0;
    } else {
        return;
    }
    c->descr = Py_NewRef(d);
    c->tag = tp->tp_version_tag;
}

/* Whether c reads attributes of type tp directly, with no setter (see attr_resolve). */
static inline int attr_readonly(const Attr *c, PyTypeObject *tp) {
    return c->readonly && c->type == tp && c->tag != 0 && tp->tp_version_tag == c->tag;
}

/* New reference, or NULL with an exception: o.<name>. */
static inline PyObject *attr_get(Attr *c, PyObject *o) {
    PyTypeObject *tp = Py_TYPE(o);
    if (tp != c->type || c->tag == 0 || tp->tp_version_tag != c->tag) {
        if (tp != c->type || (c->tag != 0 && tp->tp_version_tag != c->tag))
            attr_resolve(c, tp);
        if (c->tag == 0) return PyObject_GetAttr(o, c->name);
    }
    getter get = c->get;
    if (get) return get(o, c->closure);
    return PyMember_GetOne((const char *)o, c->member);
}

enum { FA_CONTIG, FA_DTYPE, FA_DATA, FA_SHAPE, FA_NDIM, FA_IS_CUDA, FA_PTR, FA_STREAM_PTR,
       N_FA };
#define MAX_FOREIGN 4
typedef struct {
    PyTypeObject *type;
    int style;
    PyObject *current, *dtypes;
    intptr_t (*current_fn)(void); /* style 1: current is a capsule of this, else NULL */
    int current_any; /* (session 17) its errors may come with any value ("except *") */
    Attr attrs[N_FA]; /* FA_PTR: of a.data's type; FA_STREAM_PTR: of current()'s */
    /* (session 18, style 1) the type's version tag when FA_CONTIG, FA_DTYPE and FA_DATA
     * all read it directly (C getsets or members resolved at that tag), else 0: one
     * compare then covers the three (see cupy_quick) */
    unsigned int quick_tag;
    /* (session 19, style 2) the plugin's C reader (thork_array_reader.h) when `current`
     * is its capsule, else NULL: the attributes and current(device) are read in Python */
    const ThorkArrayReader *reader;
} Foreign;
static Foreign foreigns[MAX_FOREIGN];
static int nforeign;
static int ntorch; /* of them style FX_TORCH (session 12: implied_handle's early out) */
/* (session 17) those entries, so that implied_handle passes any other argument with a
 * compare per torch type instead of a search of every registered type (refreshed with
 * ntorch after every change to foreigns) */
static Foreign *torch_foreigns[MAX_FOREIGN];

static void count_torch(void) {
    ntorch = 0;
    for (int i = 0; i < nforeign; i++)
        if (foreigns[i].style == FX_TORCH) torch_foreigns[ntorch++] = &foreigns[i];
}
static PyObject *s_c_contig, *s_data_ptr, *s_is_contig, *s_is_cuda, *s_dim, *s_ndim;

/* (session 18) The entry foreign_of found last, and its type: one compare for a program's
 * usual single foreign type. Forgotten by every registration (entries move). */
static PyTypeObject *found_type;
static Foreign *found;

static inline Foreign *foreign_of(PyTypeObject *tp) {
    if (tp == found_type) return found;
    for (int i = 0; i < nforeign; i++)
        if (foreigns[i].type == tp) {
            found_type = tp; /* borrowed: the entry keeps its type alive until forgotten */
            found = &foreigns[i];
            return found;
        }
    return NULL;
}

/* Whether a capsule's name is the C signature of a `intptr_t (void)` function: as Cython
 * writes it, with or without the exception clause of the Cython version that built it:
 * 1, or STREAM_EXCEPT_ANY for "except *" (an error may come with any value); 0: not such
 * a name. A call
 * is followed by a PyErr_Occurred check when it answers -1 (the value Cython's "except?
 * -1" raises with, and the one a clause-less function would be checked on in Cython 3),
 * and after every call for "except *" (session 17: the check costs a thread-local read). */
enum { STREAM_EXCEPT_ANY = 2 };
static int c_stream_signature(const char *sig) {
    static const char *const ok[] = {"intptr_t (void)", "intptr_t (void) except? -1",
                                     "intptr_t (void) noexcept"};
    if (!sig) return 0;
    if (strcmp(sig, "intptr_t (void) except *") == 0) return STREAM_EXCEPT_ANY;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(sig, ok[i]) == 0) return 1;
    return 0;
}

static void foreign_release(Foreign *f) {
    Py_DECREF((PyObject *)f->type);
    Py_DECREF(f->current);
    Py_XDECREF(f->dtypes);
    for (int k = 0; k < N_FA; k++) attr_release(&f->attrs[k]);
}

static PyObject *foreign_register(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    found_type = NULL;
    if (nargs == 0) {
        while (nforeign > 0) foreign_release(&foreigns[--nforeign]);
        count_torch();
        Py_RETURN_NONE;
    }
    int capsule = PyCapsule_CheckExact(args[2]);
    if (nargs != 4 || !PyType_Check(args[0]) || !(capsule || PyCallable_Check(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "foreign(type, style, current, dtypes) or foreign()");
        return NULL;
    }
    long style = PyLong_AsLong(args[1]);
    if (style == -1 && PyErr_Occurred()) return NULL;
    if (style != FX_CUPY && style != FX_TORCH) {
        PyErr_Format(PyExc_ValueError, "foreign: style 1 or 2, got %ld", style);
        return NULL;
    }
    intptr_t (*current_fn)(void) = NULL;
    int current_any = 0;
    const ThorkArrayReader *reader = NULL;
    if (capsule && style == FX_TORCH) { /* (session 19) a plugin's C reader */
        const char *name = PyCapsule_GetName(args[2]);
        if (!name || strcmp(name, THORK_ARRAY_READER_CAPSULE) != 0) {
            PyErr_Format(PyExc_ValueError,
                         "foreign: current: a capsule named '" THORK_ARRAY_READER_CAPSULE
                         "' (style 2) expected, got one named '%s'",
                         name ? name : "(no name)");
            return NULL;
        }
        reader = (const ThorkArrayReader *)PyCapsule_GetPointer(args[2], name);
        if (!reader) return NULL;
        if (reader->abi != THORK_ARRAY_READER_ABI || reader->size < sizeof(ThorkArrayReader) ||
            !reader->read || !reader->current_stream) {
            PyErr_Format(PyExc_ValueError,
                         "foreign: the array reader's ABI %u (size %u) is not the %d "
                         "(size %zu, both functions set) this module reads",
                         reader->abi, reader->size, THORK_ARRAY_READER_ABI,
                         sizeof(ThorkArrayReader));
            return NULL;
        }
    } else if (capsule) {
        const char *sig = PyCapsule_GetName(args[2]);
        int kind = c_stream_signature(sig);
        if (style != FX_CUPY || !kind) {
            PyErr_Format(PyExc_ValueError,
                         "foreign: current: a capsule of 'intptr_t (void)' (style 1) "
                         "expected, got one named '%s' for style %ld",
                         sig ? sig : "(no name)", style);
            return NULL;
        }
        current_fn = (intptr_t (*)(void))PyCapsule_GetPointer(args[2], sig);
        if (!current_fn) return NULL;
        current_any = kind == STREAM_EXCEPT_ANY;
    }
    if (style == FX_TORCH && !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "foreign: style 2 needs a dict of dtypes");
        return NULL;
    }
    Foreign *f = foreign_of((PyTypeObject *)args[0]);
    if (!f) {
        if (nforeign == MAX_FOREIGN) { /* full (types made at run time): drop the oldest */
            foreign_release(&foreigns[0]);
            memmove(&foreigns[0], &foreigns[1], (MAX_FOREIGN - 1) * sizeof(Foreign));
            nforeign--;
        }
        f = &foreigns[nforeign];
        f->type = (PyTypeObject *)Py_NewRef(args[0]);
        f->current = NULL;
        f->current_fn = NULL;
        f->reader = NULL;
        f->dtypes = NULL;
        PyObject *names[N_FA] = {s_c_contig, s_dtype, s_data, s_shape, s_ndim, s_is_cuda,
                                 s_ptr, s_ptr};
        for (int k = 0; k < N_FA; k++) attr_init(&f->attrs[k], names[k]);
        nforeign++;
    }
    f->style = (int)style;
    f->quick_tag = 0;
    count_torch();
    Py_XSETREF(f->current, Py_NewRef(args[2]));
    f->current_fn = current_fn;
    f->current_any = current_any;
    f->reader = reader;
    Py_XSETREF(f->dtypes, args[3] == Py_None ? NULL : Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

/* (session 19) foreign_reading(type): how arrays of exactly `type` are read: None (not
 * registered), "cupy", "torch" (attributes and current(device) in Python) or "c" (a
 * plugin's C reader). For tests. */
static PyObject *foreign_reading(PyObject *self, PyObject *tp) {
    (void)self;
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "foreign_reading(type)");
        return NULL;
    }
    Foreign *f = foreign_of((PyTypeObject *)tp);
    if (!f) Py_RETURN_NONE;
    return PyUnicode_FromString(f->style == FX_CUPY ? "cupy" : f->reader ? "c" : "torch");
}

/* The streams of one call, each read at most once. */
typedef struct {
    int have_cupy, have_torch;
    uint64_t cupy, torch;
    long torch_device;
    /* (session 19) a C reader's read of the call's first argument made for the implied
     * stream, kept for that argument's own read (see reader_read), and what it said */
    PyObject *read_obj;
    ThorkArrayInfo read_info;
} Currents;

/* Nothing read yet (read_info is written before it is read: left as it is, no memset). */
static inline void currents_init(Currents *cur) {
    cur->have_cupy = cur->have_torch = 0;
    cur->cupy = cur->torch = 0;
    cur->torch_device = -1;
    cur->read_obj = NULL;
}

/* 1: *v set; 0: unreadable (the caller's path); exceptions cleared. */
static int stream_value(PyObject *r, Attr *ptr_attr, uint64_t *v) {
    if (!r) {
        PyErr_Clear();
        return 0;
    }
    PyObject *p = PyLong_Check(r) ? Py_NewRef(r) : attr_get(ptr_attr, r);
    Py_DECREF(r);
    if (!p) {
        PyErr_Clear();
        return 0;
    }
    *v = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    if (*v == (uint64_t)-1 && PyErr_Occurred()) { /* -1 is also 2**64-1: ask */
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* torch's current stream on `device` into cur (1), or 0. */
static int torch_current(Foreign *f, long device, Currents *cur) {
    if (cur->have_torch && cur->torch_device == device) return 1;
    if (f->reader) { /* (session 19) the plugin's C reader */
        if (device < 0 || device > INT32_MAX ||
            !f->reader->current_stream((int32_t)device, &cur->torch))
            return 0;
    } else {
        PyObject *d = PyLong_FromLong(device);
        if (!d) {
            PyErr_Clear();
            return 0;
        }
        PyObject *fn = Py_NewRef(f->current); /* a re-registration may replace it */
        PyObject *r = PyObject_CallOneArg(fn, d);
        Py_DECREF(fn);
        Py_DECREF(d);
        if (!stream_value(r, &f->attrs[FA_STREAM_PTR], &cur->torch)) return 0;
    }
    cur->have_torch = 1;
    cur->torch_device = device;
    return 1;
}

/* (session 19) What f's C reader says of `a`: the info, or NULL when it cannot read it.
 * A read kept by implied_handle (cur->read_obj: the call's first argument, read just
 * before the arguments' loop reaches it, with no Python code run between) serves once;
 * every other read is made now (a getter run for an earlier argument may have changed a
 * tensor since: nothing older is trusted). */
static const ThorkArrayInfo *reader_read(Foreign *f, PyObject *a, Currents *cur) {
    if (cur->read_obj == a) {
        cur->read_obj = NULL;
        return &cur->read_info;
    }
    cur->read_obj = NULL;
    if (!f->reader->read(a, &cur->read_info)) {
        if (PyErr_Occurred()) PyErr_Clear(); /* the contract says none; never leak one */
        return NULL;
    }
    return &cur->read_info;
}

/* (session 19) Whether extents[0..ndim) equal the ints of tuple want (a plain tuple of
 * ints: the spec's exact shape): 1, 0 (not, or not comparable here). */
static int extents_match(const int64_t *extents, int32_t ndim, PyObject *want) {
    if (!PyTuple_CheckExact(want) || PyTuple_GET_SIZE(want) != ndim) return 0;
    for (int32_t d = 0; d < ndim; d++) {
        int overflow;
        long long w = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(want, d), &overflow);
        if (w == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (overflow || w != extents[d]) return 0;
    }
    return 1;
}

static inline PyObject *method0(PyObject *a, PyObject *name) {
    return PyObject_VectorcallMethod(name, &a, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Whether a torch-like tensor is in CUDA memory (its is_cuda; 0 also when unreadable).
 * The readers serve one visible GPU only (see the section's head), so that is the spec's
 * device: torch and Thork see the same one. */
static int on_cuda(Foreign *f, PyObject *a, Currents *cur, int keep) {
    if (f->reader) {
        const ThorkArrayInfo *info = reader_read(f, a, cur);
        if (info && keep) cur->read_obj = a; /* the loop's next read of `a` */
        return info && info->device_type == 2;
    }
    PyObject *d = attr_get(&f->attrs[FA_IS_CUDA], a);
    int ok = d == Py_True;
    Py_XDECREF(d);
    if (!d) PyErr_Clear();
    return ok;
}

/* When no stream was given and an argument is a torch-like tensor, the launch stream is
 * its library's current stream on its device (the Python path's implied stream): *handle
 * set (1); 0: none such; -1: one such that cannot be read (the caller's path). */
static int implied_handle(PyObject *const *items, Py_ssize_t n, long device,
                          uint64_t *handle, Currents *cur) {
    if (device < 0) return 0; /* (callers skip the call when no torch type is registered) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTypeObject *tp = Py_TYPE(items[i]);
        int k = 0;
        while (k < ntorch && torch_foreigns[k]->type != tp) k++;
        if (k == ntorch) continue;
        Foreign *f = torch_foreigns[k];
        /* (the read is kept for the loop only for the first argument: nothing runs
         * between; an earlier argument's reading may run Python code) */
        if (!on_cuda(f, items[i], cur, i == 0) || !torch_current(f, device, cur)) return -1;
        *handle = cur->torch;
        return 1;
    }
    return 0;
}

/* The dimensions of `a` against a spec: its exact shape (want_shape) or, without one, its
 * ndim (a.dim() for torch, a.ndim for CuPy; -1: any). 1: they match; 0: not, or unreadable
 * (the caller's path; nothing raised); -1: error. */
static int dims_match(Foreign *f, PyObject *a, PyObject *want_shape, int ndim, int torch) {
    PyObject *v;
    int ok;
    if (want_shape) {
        v = attr_get(&f->attrs[FA_SHAPE], a);
        if (!v) {
            PyErr_Clear();
            return 0;
        }
        ok = same_shape(v, want_shape);
        Py_DECREF(v);
        return ok;
    }
    if (ndim < 0) return 1;
    v = torch ? method0(a, s_dim) : attr_get(&f->attrs[FA_NDIM], a);
    ok = v && PyLong_Check(v) && PyLong_AsLong(v) == ndim;
    Py_XDECREF(v);
    PyErr_Clear();
    return ok;
}

/* ref's callback: the slot's array is gone; drop its data object (the dead reference
 * stays until the next call replaces it: a weak reference is not released inside its
 * own callback). A reference the slot no longer holds changes nothing. */
static PyObject *fslot_forget(PyObject *capsule, PyObject *ref) {
    ForeignSlot *slot = PyCapsule_GetContext(capsule);
    if (slot && slot->ref == ref) Py_CLEAR(slot->data);
    Py_RETURN_NONE;
}

static PyMethodDef fslot_forget_def = {"forget", fslot_forget, METH_O,
                                       "a foreign reader's slot: its array is gone"};

/* Keep in slot: array a (weakly), its data object mem and that object's pointer p. Every
 * field is written before the old references go, so a thread (or a finalizer) that runs
 * in that release finds a whole entry. A type without weak references: nothing kept. */
static void remember(ForeignSlot *slot, PyObject *a, PyObject *mem, uint64_t p) {
    if (!slot->forget) {
        PyObject *cap = PyCapsule_New(&fslot_forget_def, "thork.fslot", NULL);
        if (cap && PyCapsule_SetContext(cap, slot) == 0)
            slot->forget = PyCFunction_New(&fslot_forget_def, cap);
        Py_XDECREF(cap);
        if (!slot->forget) {
            PyErr_Clear();
            return;
        }
    }
    PyObject *ref = PyWeakref_NewRef(a, slot->forget);
    if (!ref) {
        PyErr_Clear();
        return;
    }
    PyObject *old_ref = slot->ref, *old_data = slot->data;
    slot->ref = ref;
    slot->data = Py_NewRef(mem);
    slot->ptr = p;
    Py_XDECREF(old_ref);
    Py_XDECREF(old_data);
}

/* (session 18) Note in f whether one compare of tp's version tag covers its contiguity,
 * dtype and data reads (each resolved to a direct getter at tp's current tag). */
static void foreign_quick(Foreign *f, PyTypeObject *tp) {
    unsigned int tag = tp->tp_version_tag;
    f->quick_tag = tag;
    for (int k = FA_CONTIG; k <= FA_DATA; k++) {
        const Attr *c = &f->attrs[k];
        if (c->type != tp || c->tag != tag || (!c->get && !c->member)) f->quick_tag = 0;
    }
}

/* The attribute c resolved directly (attr_resolve) of o: a new reference or NULL with an
 * exception. The caller has checked o's type and its tag. */
static inline PyObject *attr_direct(const Attr *c, PyObject *o) {
    return c->get ? c->get(o, c->closure) : PyMember_GetOne((const char *)o, c->member);
}

/* (session 18) CuPy's current stream into cur, once per call: 1, or 0 when unreadable
 * (nothing raised). */
static int cupy_current(Foreign *f, Currents *cur) {
    if (cur->have_cupy) return 1;
    if (f->current_fn) {
        intptr_t h = f->current_fn();
        cur->cupy = (uint64_t)h;
        if ((h == -1 || f->current_any) && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    } else if (!stream_value(PyObject_CallNoArgs(f->current), &f->attrs[FA_STREAM_PTR],
                             &cur->cupy)) {
        return 0;
    }
    cur->have_cupy = 1;
    return 1;
}

/* (session 18) The hot path's read of a CuPy-style array for a pointer parameter of any
 * ndim, as little as bench/ideal_launcher.c reads (docs/benchmarks.md "Session 18"): the
 * caller has checked that a's type is f's and that its version tag is f->quick_tag (the
 * three getters direct). Contiguity; the dtype object the slot last matched (identity);
 * the data object the slot keeps (see read_foreign) with its read-only pointer. 1: *ptr
 * set; 0: anything else, read_foreign decides (nothing raised, the stream kept in cur). */
static inline int cupy_quick(Foreign *f, PyObject *a, ForeignSlot *slot, uint64_t handle,
                             Currents *cur, uint64_t *ptr) {
    if ((!cur->have_cupy && !cupy_current(f, cur)) || (cur->cupy > 2 && cur->cupy != handle))
        return 0;
    PyObject *v = attr_direct(&f->attrs[FA_CONTIG], a);
    int ok = v == Py_True;
    Py_XDECREF(v);
    if (ok) {
        v = attr_direct(&f->attrs[FA_DTYPE], a);
        ok = v && v == slot->seen;
        Py_XDECREF(v);
    }
    if (ok) {
        PyObject *mem = attr_direct(&f->attrs[FA_DATA], a);
        ok = mem && slot->data == mem && attr_readonly(&f->attrs[FA_PTR], Py_TYPE(mem));
        if (ok) *ptr = slot->ptr;
        Py_XDECREF(mem);
    }
    if (!ok) PyErr_Clear();
    return ok;
}

/* Array `a` of registered type f for a slot: the spec's typestr (CuPy) or DType (torch),
 * exact shape (want_shape) or ndim (-1: any), on `device`, ready on `handle` (see the
 * section's head). 1: *ptr set; 0: the caller's path (nothing raised); -1: error. */
static int read_foreign(Foreign *f, PyObject *a, PyObject *typestr, PyObject *dtype,
                        ForeignSlot *slot, PyObject *want_shape, int ndim, long device,
                        uint64_t handle, Currents *cur, uint64_t *ptr) {
    PyObject *v, *keep = NULL; /* keep: a data object whose pointer the slot may keep */
    int ok;
    if (f->style == FX_CUPY) {
        if (!typestr || !cupy_current(f, cur)) return 0;
        if (cur->cupy > 2 && cur->cupy != handle) return 0; /* the caller waits on it */
        v = attr_get(&f->attrs[FA_CONTIG], a);
        ok = v == Py_True;
        Py_XDECREF(v);
        if (!ok) goto miss;
        v = attr_get(&f->attrs[FA_DTYPE], a);
        if (!v) goto miss;
        if (v != slot->seen) {
            PyObject *str = PyObject_GetAttr(v, s_str);
            ok = str && PyUnicode_Check(str) && PyUnicode_Compare(str, typestr) == 0;
            Py_XDECREF(str);
            if (ok) Py_XSETREF(slot->seen, Py_NewRef(v));
        } else {
            ok = 1;
        }
        Py_DECREF(v);
        if (!ok) goto miss;
        /* (a pointer parameter of any ndim: nothing to read) */
        if ((want_shape || ndim >= 0) && (ok = dims_match(f, a, want_shape, ndim, 0)) <= 0)
            return ok;
        PyObject *mem = attr_get(&f->attrs[FA_DATA], a);
        if (!mem) goto miss;
        /* (session 16) The data object the slot keeps (a strong reference while it is
         * kept, so the same address is the same object; a.data set or __init__ run again
         * gives another), whose pointer cannot change (data.ptr read-only in C, as CuPy's
         * Cython `readonly intptr_t ptr`): the pointer read then, whichever array holds
         * the object (the array's pointer is its data object's by this reader's
         * definition). (session 20) The array itself is not compared: the slot's weak
         * reference to it only drops the data object when it goes (fslot_forget). */
        if (slot->data == mem && attr_readonly(&f->attrs[FA_PTR], Py_TYPE(mem))) {
            *ptr = slot->ptr;
            Py_DECREF(mem);
            return 1;
        }
        v = attr_get(&f->attrs[FA_PTR], mem);
        /* a pointer that may change is read every call: nothing to keep */
        if (v && attr_readonly(&f->attrs[FA_PTR], Py_TYPE(mem)))
            keep = mem;
        else
            Py_DECREF(mem);
    } else if (f->reader) {
        /* (session 19) the plugin's C reader: the same checks as below, on what it read */
        const ThorkArrayInfo *info = reader_read(f, a, cur);
        if (device < 0 || !info || info->device_type != 2 || info->device_id != device ||
            !torch_current(f, device, cur))
            return 0;
        if (cur->torch != handle) return 0; /* another stream given: the caller follows */
        PyObject *dt = (PyObject *)info->dtype;
        if (!dt) return 0;
        if (dt != slot->seen) {
            PyObject *d = PyDict_GetItemWithError(f->dtypes, dt); /* borrowed */
            if (!d || d != dtype) goto miss;
            Py_XSETREF(slot->seen, Py_NewRef(dt));
        }
        if (!info->contiguous) return 0;
        if (want_shape ? !extents_match(info->shape, info->ndim, want_shape)
                       : (ndim >= 0 && info->ndim != ndim))
            return 0;
        *ptr = info->ptr;
        return 1;
    } else {
        if (device < 0 || !on_cuda(f, a, cur, 0) || !torch_current(f, device, cur)) return 0;
        if (cur->torch != handle) return 0; /* another stream given: the caller follows */
        v = attr_get(&f->attrs[FA_DTYPE], a);
        if (!v) goto miss;
        if (v != slot->seen) {
            PyObject *d = PyDict_GetItemWithError(f->dtypes, v); /* borrowed */
            ok = d && d == dtype;
            if (ok) Py_XSETREF(slot->seen, Py_NewRef(v));
        } else {
            ok = 1;
        }
        Py_DECREF(v);
        if (!ok) goto miss;
        v = method0(a, s_is_contig);
        ok = v == Py_True;
        Py_XDECREF(v);
        if (!ok) goto miss;
        if ((ok = dims_match(f, a, want_shape, ndim, 1)) <= 0) return ok;
        v = method0(a, s_data_ptr);
    }
    if (!v || !PyLong_Check(v)) {
        Py_XDECREF(v);
        goto miss;
    }
    *ptr = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (*ptr == (uint64_t)-1 && PyErr_Occurred()) goto miss;
    if (keep) {
        remember(slot, a, keep, *ptr);
        Py_DECREF(keep);
    }
    if (f->style == FX_CUPY) foreign_quick(f, Py_TYPE(a));
    return 1;
miss:
    Py_XDECREF(keep);
    PyErr_Clear();
    return 0;
}

/* Array i of a Guard with CAI arrays: 1 when `a`'s type is a plain producer in g->kinds
 * and its __cuda_array_interface__ names the spec's typestr and exact shape, no strides or
 * mask, a default stream or the launch stream, and (written arrays) a writable buffer:
 * *ptr set. 0: the caller's path; -1: error. */
static int guard_cai(GuardObject *g, Py_ssize_t i, PyObject *a, uint64_t handle,
                     uint64_t *ptr) {
    PyObject *kind = PyDict_GetItemWithError(g->kinds, (PyObject *)Py_TYPE(a));
    if (!kind) return PyErr_Occurred() ? -1 : 0;
    if (kind != s_kind_cai &&
        !(PyUnicode_Check(kind) && PyUnicode_Compare(kind, s_kind_cai) == 0))
        return 0;
    PyObject *cai = PyObject_GetAttr(a, s_cai);
    if (!cai) {
        PyErr_Clear();
        return 0;
    }
    int r = 0, ok;
    PyObject *v;
    if (!PyDict_Check(cai)) goto done;
    v = PyDict_GetItemWithError(cai, s_typestr);
    if (!v || !PyUnicode_Check(v) || PyUnicode_Compare(v, g->typestrs[i]) != 0) goto done;
    v = PyDict_GetItemWithError(cai, s_strides);
    if (v && v != Py_None) goto done;
    v = PyDict_GetItemWithError(cai, s_mask);
    if (v && v != Py_None) goto done;
    v = PyDict_GetItemWithError(cai, s_stream);
    if (!is_default_stream(v)) {
        if (PyErr_Occurred() || !v || !PyLong_Check(v)) goto done;
        uint64_t produced = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        if (produced != handle) goto done; /* the caller orders the launch after it */
    }
    v = PyDict_GetItemWithError(cai, s_shape);
    if (!v) goto done;
    ok = same_shape(v, g->shapes[i]);
    if (ok < 0) {
        r = -1;
        goto done;
    }
    if (!ok) goto done;
    v = PyDict_GetItemWithError(cai, s_data);
    if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) goto done;
    {
        PyObject *p = PyTuple_GET_ITEM(v, 0);
        int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(v, 1));
        if (readonly < 0) {
            r = -1;
            goto done;
        }
        if ((readonly && g->writes[i]) || !PyLong_Check(p)) goto done;
        *ptr = PyLong_AsUnsignedLongLong(p);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        r = 1;
    }
done:
    if (r == 0 && PyErr_Occurred()) r = -1;
    Py_DECREF(cai);
    return r;
}

/* Array i of a Guard with DLPack-only producers: 1 when `a`'s type is mapped to "dlpack"
 * in g->kinds, its __dlpack_device__() names CUDA (or managed) memory on g->device_id and
 * its __dlpack__(stream=<the launch stream; 1 for the legacy one>, max_version=(1, 0))
 * (the protocol's handshake: the producer orders that stream after its work) gives a
 * capsule whose tensor has the spec's DLPack dtype and exact shape in the compact
 * row-major layout (strides absent or those of it; extents of 1 may carry any stride)
 * and, where the kernel writes it, is not read-only: *ptr is data + byte_offset and
 * *cap the capsule (a new reference: the caller drops it once the launch is queued,
 * which releases the producer's memory through the capsule's destructor). 0: anything
 * else (the caller's path reads the array again and says why); -1: error. */
static int guard_dlpack(GuardObject *g, Py_ssize_t i, PyObject *a, PyObject *stream,
                        uint64_t *ptr, PyObject **cap) {
    PyObject *dev = PyObject_CallMethodNoArgs(a, s_dlpack_device);
    if (!dev) {
        PyErr_Clear();
        return 0;
    }
    long kind = -1, id = -1;
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
        PyObject *k = PyTuple_GET_ITEM(dev, 0), *d = PyTuple_GET_ITEM(dev, 1);
        if ((k == s_dl_cuda || k == s_dl_managed) && d == g->device_obj) {
            /* CPython's cached small ints (the common reply): no conversion */
            kind = k == s_dl_cuda ? 2 : 13;
            id = g->device_id;
        } else {
            kind = PyLong_AsLong(k);
            id = PyLong_AsLong(d);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                kind = -1;
            }
        }
    }
    Py_DECREF(dev);
    if ((kind != 2 && kind != 13) || id != g->device_id) return 0; /* kDLCUDA, managed */
    PyObject *argv[3] = {a, stream, s_max_version};
    PyObject *c = PyObject_VectorcallMethod(s_dlpack, argv, 1, s_dlpack_kw);
    if (!c) { /* e.g. a DLPack 0.x producer without max_version: the caller's path */
        PyErr_Clear();
        return 0;
    }
    const DLTens *t;
    uint32_t major;
    int readonly;
    int got = dl_tensor(c, &t, &major, &readonly);
    if (!got || (got == 2 && major != 1)) goto miss; /* another ABI major: caller's path */
    PyObject *shape = g->shapes[i];
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (t->dtype.lanes != 1 || ((int)t->dtype.code << 8 | (int)t->dtype.bits) != g->dlcodes[i] ||
        t->ndim != ndim || (ndim && !t->shape) || t->device.device_id != id ||
        (t->device.device_type != 2 && t->device.device_type != 13) ||
        (readonly && g->writes[i]))
        goto miss;
    int64_t step = 1;
    const int64_t *dims = g->dl_ndim[i] == ndim ? g->dl_dims[i] : NULL;
    for (Py_ssize_t d = ndim - 1; d >= 0; d--) {
        long long want = dims ? dims[d] : PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        if (want == -1 && PyErr_Occurred()) {
            Py_DECREF(c);
            return -1;
        }
        if (t->shape[d] != want) goto miss;
        if (t->strides && want > 1 && t->strides[d] != step) goto miss;
        step *= want;
    }
    *ptr = (uint64_t)(uintptr_t)t->data + t->byte_offset;
    *cap = c;
    return 1;
miss:
    Py_DECREF(c);
    return 0;
}

static PyObject *guard_call(GuardObject *g, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames || nargs != g->n + 1) {
        PyErr_Format(PyExc_TypeError, "guard: %zd arrays and a stream expected", g->n);
        return NULL;
    }
    /* the launch stream */
    PyObject *s = args[g->n];
    uint64_t handle = 0;
    if (s != Py_None) {
        if (PyLong_CheckExact(s)) {
            handle = PyLong_AsUnsignedLongLong(s);
        } else {
            PyObject *h = PyObject_CallOneArg(g->to_handle, s);
            if (!h) return NULL;
            handle = PyLong_AsUnsignedLongLong(h);
            Py_DECREF(h);
        }
        if (PyErr_Occurred()) return NULL;
    }
    uint64_t ptrs[MAX_SLOTS], bits = 0;
    /* DLPack capsules read for this call: held until the launch is queued */
    PyObject *caps[MAX_SLOTS];
    Py_ssize_t ncaps = 0;
    PyObject *dl_stream = NULL;
    PyObject *result = Py_False;
    Currents cur;
    currents_init(&cur);
    if (s == Py_None && g->kinds && ntorch &&
        implied_handle(args, g->n, g->device_id, &handle, &cur) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *a = args[i], *v, *own;
        int ok;
        if (Py_TYPE(a) != g->array_type) {
            if (!g->kinds) goto done;
            Foreign *f = g->typestrs[i] ? foreign_of(Py_TYPE(a)) : NULL;
            if (f) { /* session 11: read through its own attributes */
                ok = read_foreign(f, a, g->typestrs[i], g->dtypes[i], &g->fslot[i],
                                  g->shapes[i], -1, g->device_id, handle, &cur, &ptrs[i]);
                if (ok < 0) goto error;
                if (!ok) goto done;
                bits |= ptrs[i];
                continue;
            }
            uint64_t tag = kinds_tag(g->kinds, g->kinds_watched);
            int dl = g->dlcodes[i] >= 0 && Py_TYPE(a) == g->dl_type[i] && tag &&
                     g->dl_tag[i] == tag;
            if (!dl) {
                PyObject *kind = PyDict_GetItemWithError(g->kinds, (PyObject *)Py_TYPE(a));
                if (!kind) {
                    if (PyErr_Occurred()) goto error;
                    goto done;
                }
                dl = g->dlcodes[i] >= 0 && (kind == s_kind_dlpack ||
                        (PyUnicode_Check(kind) && PyUnicode_Compare(kind, s_kind_dlpack) == 0));
                if (dl) { /* remembered while the table is unchanged (session 12) */
                    Py_INCREF(Py_TYPE(a));
                    Py_XSETREF(g->dl_type[i], Py_TYPE(a));
                    g->dl_tag[i] = tag;
                }
            }
            if (dl) {
                if (!dl_stream) { /* the stream argument, made once per call */
                    dl_stream = PyLong_FromUnsignedLongLong(handle ? handle : 1);
                    if (!dl_stream) goto error;
                }
                ok = guard_dlpack(g, i, a, dl_stream, &ptrs[i], &caps[ncaps]);
                if (ok > 0) ncaps++;
            } else if (g->typestrs[i]) {
                ok = guard_cai(g, i, a, handle, &ptrs[i]);
            } else {
                goto done;
            }
            if (ok < 0) goto error;
            if (!ok) goto done;
            bits |= ptrs[i];
            continue;
        }
        if (!(v = field_get(a, &g->fields[F_SHAPE]))) goto error;
        if (v == g->shape_seen[i]) {
            ok = 1;
        } else if ((ok = same_shape(v, g->shapes[i])) > 0 && PyTuple_CheckExact(v)) {
            Py_XSETREF(g->shape_seen[i], Py_NewRef(v));
        }
        Py_DECREF(v);
        if (ok <= 0) goto miss_or_error;
        if (!(v = field_peek(a, &g->fields[F_DTYPE], &own))) goto error;
        ok = v == g->dtypes[i];
        Py_XDECREF(own);
        if (!ok) goto done;
        if (!(v = field_get(a, &g->fields[F_DEVICE]))) goto error;
        ok = same(v, g->device);
        Py_DECREF(v);
        if (ok <= 0) goto miss_or_error;
        /* (session 17) the stream and pointer borrowed: their reads run no Python code */
        if (!(v = field_peek(a, &g->fields[F_STREAM], &own))) goto error;
        if (v != Py_None && v != s_zero) {
            uint64_t produced = PyLong_AsUnsignedLongLong(v);
            Py_XDECREF(own);
            if (produced == (uint64_t)-1 && PyErr_Occurred()) goto error;
            if (produced != 0 && produced != handle)
                goto done;  /* the caller orders the launch after the producer */
        } else {
            Py_XDECREF(own);
        }
        if (!(v = field_peek(a, &g->fields[F_PTR], &own))) goto error;
        ptrs[i] = PyLong_AsUnsignedLongLong(v);
        Py_XDECREF(own);
        if (ptrs[i] == (uint64_t)-1 && PyErr_Occurred()) goto error;
        bits |= ptrs[i];
        continue;
    miss_or_error:
        if (ok < 0) goto error;
        goto done;
    }
    if (bits & g->mask) goto done;
    if (g->kinds) { /* a written array shares no byte with another (or, in place, is it) */
        for (Py_ssize_t w = 0; w < g->n; w++) {
            if (!g->writes[w] || !g->nbytes[w]) continue;
            for (Py_ssize_t j = 0; j < g->n; j++) {
                if (j == w || !g->nbytes[j]) continue;
                if (ptrs[w] < ptrs[j] + g->nbytes[j] && ptrs[j] < ptrs[w] + g->nbytes[w] &&
                    !(g->in_place && ptrs[w] == ptrs[j] && g->nbytes[w] == g->nbytes[j]))
                    goto done; /* the caller's path reports it */
            }
        }
    }
    {
        PreparedObject *l = g->launch;
        uint64_t vals[MAX_SLOTS];
        for (Py_ssize_t k = 0; k < l->nslots; k++) vals[k] = ptrs[g->order[k]];
        PyObject *r = do_launch(l, vals, (void *)(uintptr_t)handle);
        if (!r) goto error;
        Py_DECREF(r);
        result = Py_True;
    }
done:
    /* the launch is queued (or nothing was): the capsules release the producers' memory */
    while (ncaps > 0) Py_DECREF(caps[--ncaps]);
    Py_XDECREF(dl_stream);
    Py_INCREF(result);
    return result;
error:
    while (ncaps > 0) Py_DECREF(caps[--ncaps]);
    Py_XDECREF(dl_stream);
    return NULL;
}

static PyTypeObject GuardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Guard",
    .tp_basicsize = sizeof(GuardObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "guard(*arrays, stream) -> bool: launch when the arrays are the prepared kind.",
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GuardObject, vectorcall),
};

/* ---- Binder ------------------------------------------------------------------------
 * Binder(launcher, array_type, device, specs, cai)
 *   cai: False (no __cuda_array_interface__ reading), True (any type's), or the dict
 *   thork_core._probe.KINDS (only types it maps to "cai": plain producers such as CuPy;
 *   a torch tensor, whose stream is torch's, and a type not in it go to the caller).
 *   The checked launch of kernel[grid, block](*args) for the common argument kinds, in C:
 *   __call__(grid, block, shared, stream, args) -> bool. True: every argument was of a
 *   kind checked here and the kernel was launched; False: some argument needs the
 *   caller's general path (adapters, conversions, staging, waits, errors), and nothing
 *   was launched. specs: one per parameter,
 *     pointer: (dtype, typestr, ndim, writes): dtype the DType a DeviceArray must hold
 *              (identity), typestr the __cuda_array_interface__ typestr accepted (None:
 *              none), ndim (-1: any), writes (a read-only CAI array goes to the caller)
 *     scalar:  (is_float,) the parameter's kind being the launcher's
 *   A pointer argument is taken here when it is exactly array_type (DeviceArray) with the
 *   dtype, on `device`, produced on the legacy or the launch stream, of ndim; or (cai
 *   true: one visible device) when its __cuda_array_interface__ names the typestr, no
 *   strides or mask, a legacy/per-thread default or absent stream, and a writable buffer
 *   where the kernel writes. A scalar when it is an exact int (bool for bool parameters;
 *   an int in range for integer ones) or, for float parameters, an exact float or int
 *   that fits (16-bit float parameters always go to the caller).
 */

typedef struct {
    PyObject *dtype, *typestr;
    int pointer, ndim, writes, is_float;
    ForeignSlot fslot; /* foreign readers: what the slot keeps (session 11, 16) */
} ParamSpec;

typedef struct {
    PyObject_HEAD
    LauncherObject *launcher;
    PyTypeObject *array_type;
    long device;
    PyObject *device_obj; /* device as an int: an identical object needs no conversion */
    int cai;
    PyObject *kinds; /* NULL: any type's interface; else only types mapped to "cai" here */
    Field fields[N_FIELDS];
    Py_ssize_t n;
    ParamSpec *specs;
    vectorcallfunc vectorcall_slot;
} BinderObject;

static PyTypeObject BinderType;

static int binder_init(BinderObject *self, PyObject *args, PyObject *kw) {
    PyObject *launcher, *array_type, *specs, *cai_arg;
    long device;
    int cai;
    static char *names[] = {"launcher", "array_type", "device", "specs", "cai", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!lOO", names, &LauncherType, &launcher,
                                     &PyType_Type, &array_type, &device, &specs, &cai_arg))
        return -1;
    /* (session 17) once only: a launch in progress reads the specs it was made with (its
     * reads may run Python code), so neither freeing nor swapping them is safe */
    if (self->launcher) {
        PyErr_SetString(PyExc_TypeError, "Binder is already initialized: make a new one");
        return -1;
    }
    if (PyDict_Check(cai_arg)) {
        cai = 1;
    } else if ((cai = PyObject_IsTrue(cai_arg)) < 0) {
        return -1;
    }
    LauncherObject *l = (LauncherObject *)launcher;
    if (!ready(l)) return -1;
    PyObject *fast = PySequence_Fast(specs, "specs must be a sequence");
    if (!fast) return -1;
    PyObject *dev_obj = PyLong_FromLong(device);
    if (!dev_obj) {
        Py_DECREF(fast);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n != l->nparams) {
        PyErr_Format(PyExc_ValueError, "specs: %zd expected (one per parameter), got %zd",
                     l->nparams, n);
        Py_DECREF(fast);
        Py_DECREF(dev_obj);
        return -1;
    }
    ParamSpec *ps = PyMem_Calloc((size_t)(n ? n : 1), sizeof(ParamSpec));
    if (!ps) {
        Py_DECREF(fast);
        Py_DECREF(dev_obj);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *spec = PySequence_Fast_GET_ITEM(fast, i);
        ps[i].pointer = l->kinds[i] == 'P';
        if (ps[i].pointer) {
            PyObject *dtype, *typestr;
            int ndim, writes;
            if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4 ||
                !PyArg_ParseTuple(spec, "OOip", &dtype, &typestr, &ndim, &writes)) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_TypeError, "specs[%zd]: (dtype, typestr, ndim, "
                                 "writes) for a pointer parameter", i);
                goto fail;
            }
            if (typestr != Py_None && !PyUnicode_Check(typestr)) {
                PyErr_Format(PyExc_TypeError, "specs[%zd]: typestr must be a str or None", i);
                goto fail;
            }
            ps[i].dtype = Py_NewRef(dtype);
            ps[i].typestr = Py_NewRef(typestr);
            ps[i].ndim = ndim;
            ps[i].writes = writes;
        } else {
            int is_float;
            if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 1 ||
                !PyArg_ParseTuple(spec, "p", &is_float)) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_TypeError, "specs[%zd]: (is_float,) for a scalar", i);
                goto fail;
            }
            ps[i].is_float = is_float;
        }
    }
    Py_DECREF(fast);
    Py_XSETREF(self->launcher, (LauncherObject *)Py_NewRef(launcher));
    Py_XSETREF(self->array_type, (PyTypeObject *)Py_NewRef(array_type));
    self->device = device;
    Py_XSETREF(self->device_obj, dev_obj);
    self->cai = cai;
    Py_XSETREF(self->kinds, PyDict_Check(cai_arg) ? Py_NewRef(cai_arg) : NULL);
    field_init(&self->fields[F_SHAPE], self->array_type, s_shape);
    field_init(&self->fields[F_DTYPE], self->array_type, s_dtype);
    field_init(&self->fields[F_DEVICE], self->array_type, s_device);
    field_init(&self->fields[F_STREAM], self->array_type, s_stream);
    field_init(&self->fields[F_PTR], self->array_type, s_ptr);
    self->n = n;
    self->specs = ps;
    return 0;
fail:
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(ps[i].dtype);
        Py_XDECREF(ps[i].typestr);
    }
    PyMem_Free(ps);
    Py_DECREF(fast);
    Py_DECREF(dev_obj);
    return -1;
}

static void binder_dealloc(BinderObject *self) {
    if (self->specs) {
        for (Py_ssize_t i = 0; i < self->n; i++) {
            Py_XDECREF(self->specs[i].dtype);
            Py_XDECREF(self->specs[i].typestr);
            fslot_clear(&self->specs[i].fslot);
        }
        PyMem_Free(self->specs);
    }
    Py_XDECREF((PyObject *)self->launcher);
    Py_XDECREF((PyObject *)self->array_type);
    Py_XDECREF(self->kinds);
    Py_XDECREF(self->device_obj);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1: the value is in *slot; 0: the caller's path; -1: error. */
static int bind_scalar(char kind, int is_float, PyObject *v, uint64_t *slot) {
    if (kind == '?') {
        if (!PyBool_Check(v) && !PyLong_CheckExact(v)) return 0;
    } else if (is_float) {
        if (kind == 'H') return 0; /* float16/bfloat16: Python converts the bits */
        if (PyFloat_CheckExact(v)) {
            double d = PyFloat_AS_DOUBLE(v);
            /* a finite value float32 cannot hold: the caller's path decides */
            if (kind == 'f' && d == d && (d > 3.4028234663852886e38 ||
                                          d < -3.4028234663852886e38) &&
                d != 1.0 / 0.0 && d != -1.0 / 0.0)
                return 0;
        } else if (!PyLong_CheckExact(v)) {
            return 0;
        } else {
            double d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            if (kind == 'f' && (d > 3.4028234663852886e38 || d < -3.4028234663852886e38))
                return 0;
        }
    } else if (!PyLong_CheckExact(v)) {
        return 0;
    }
    if (put(kind, v, slot) == 0) return 1;
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) { /* out of range: named by Python */
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static int is_default_stream(PyObject *s) {
    if (!s || s == Py_None) return 1;
    if (!PyLong_CheckExact(s)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(s, &overflow);
    return !overflow && (v == 0 || v == 1 || v == 2);
}

/* 1: *ptr set; 0: the caller's path; -1: error. */
static int bind_cai(BinderObject *b, const ParamSpec *ps, PyObject *a, uint64_t *ptr) {
    if (ps->typestr == Py_None) return 0;
    if (b->kinds) {
        /* Only a type the probe's table lists as a plain producer: a follower's array (a
         * torch tensor: its stream is torch's) or a type not seen yet (the Python path
         * decides its kind once) goes to the caller. */
        PyObject *kind = PyDict_GetItemWithError(b->kinds, (PyObject *)Py_TYPE(a));
        if (!kind) return PyErr_Occurred() ? -1 : 0;
        if (kind != s_kind_cai &&
            !(PyUnicode_Check(kind) && PyUnicode_Compare(kind, s_kind_cai) == 0))
            return 0;
    }
    PyObject *cai = PyObject_GetAttr(a, s_cai);
    if (!cai) {
        PyErr_Clear(); /* not an array with the interface (or its getter refused) */
        return 0;
    }
    int r = 0;
    PyObject *v;
    if (!PyDict_Check(cai)) goto done;
    v = PyDict_GetItemWithError(cai, s_typestr);
    if (!v || !PyUnicode_Check(v) || PyUnicode_Compare(v, ps->typestr) != 0) goto done;
    v = PyDict_GetItemWithError(cai, s_strides);
    if (v && v != Py_None) goto done;
    v = PyDict_GetItemWithError(cai, s_mask);
    if (v && v != Py_None) goto done;
    if (!is_default_stream(PyDict_GetItemWithError(cai, s_stream))) goto done;
    if (ps->ndim >= 0) {
        v = PyDict_GetItemWithError(cai, s_shape);
        if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != ps->ndim) goto done;
    }
    v = PyDict_GetItemWithError(cai, s_data);
    if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) goto done;
    {
        PyObject *p = PyTuple_GET_ITEM(v, 0), *ro = PyTuple_GET_ITEM(v, 1);
        int readonly = PyObject_IsTrue(ro);
        if (readonly < 0) goto error;
        if (readonly && ps->writes) goto done;
        if (!PyLong_Check(p)) goto done;
        *ptr = PyLong_AsUnsignedLongLong(p);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        r = 1;
    }
done:
    if (PyErr_Occurred()) r = -1;
    Py_DECREF(cai);
    return r;
error:
    Py_DECREF(cai);
    return -1;
}

/* 1: *ptr set; 0: the caller's path; -1: error. */
static int bind_array(BinderObject *b, const ParamSpec *ps, PyObject *a, uint64_t handle,
                      uint64_t *ptr) {
    /* (session 17) Every read borrowed (field_peek): each value is done with before the
     * next read, the only step here that may run Python code (a getattr fallback). */
    PyObject *v, *own;
    int ok;
    if (!(v = field_peek(a, &b->fields[F_DTYPE], &own))) return -1;
    ok = v == ps->dtype;
    Py_XDECREF(own);
    if (!ok) return 0;
    if (!(v = field_peek(a, &b->fields[F_DEVICE], &own))) return -1;
    if (v != b->device_obj) { /* (an identical int is the ordinal: CPython's small ints) */
        long device = PyLong_CheckExact(v) ? PyLong_AsLong(v) : -2;
        Py_XDECREF(own);
        if (device == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (device != b->device) return 0;
    } else {
        Py_XDECREF(own);
    }
    if (!(v = field_peek(a, &b->fields[F_STREAM], &own))) return -1;
    if (v != Py_None && v != s_zero) {
        uint64_t produced = PyLong_AsUnsignedLongLong(v);
        Py_XDECREF(own);
        if (produced == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (produced != 0 && produced != handle) return 0; /* the caller waits on it */
    } else {
        Py_XDECREF(own);
    }
    if (ps->ndim >= 0) {
        if (!(v = field_peek(a, &b->fields[F_SHAPE], &own))) return -1;
        ok = PyTuple_Check(v) && PyTuple_GET_SIZE(v) == ps->ndim;
        Py_XDECREF(own);
        if (!ok) return 0;
    }
    if (!(v = field_peek(a, &b->fields[F_PTR], &own))) return -1;
    *ptr = PyLong_AsUnsignedLongLong(v);
    Py_XDECREF(own);
    if (*ptr == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The binder's decision and launch for args[0..n): 1 launched, 0 the caller's path (nothing
 * launched), -1 error. Shared by Binder.__call__ and LaunchCall's hot call. */
static int binder_bind(BinderObject *self, const unsigned grid[3], const unsigned block[3],
                       unsigned shared, uint64_t handle, int given, PyObject *const *items,
                       Py_ssize_t n) {
    if (!self->launcher) {
        PyErr_SetString(PyExc_RuntimeError, "Binder was not initialized");
        return -1;
    }
    if (n != self->n) return 0; /* the caller's path names the count */
    LauncherObject *l = self->launcher;
    uint64_t vals[MAX_PARAMS];
    void *params[MAX_PARAMS];
    int r = 1;
    Currents cur;
    currents_init(&cur);
    Foreign *f;
    /* given no stream, a torch-like tensor's current stream is the launch stream */
    if (!given && self->kinds && ntorch &&
        implied_handle(items, n, self->device, &handle, &cur) < 0)
        return 0;
    for (Py_ssize_t i = 0; i < self->n && r == 1; i++) {
        ParamSpec *ps = &self->specs[i];
        PyObject *a = items[i];
        params[i] = &vals[i];
        vals[i] = 0;
        if (!ps->pointer)
            r = bind_scalar(l->kinds[i], ps->is_float, a, &vals[i]);
        else if (Py_TYPE(a) == self->array_type)
            r = bind_array(self, ps, a, handle, &vals[i]);
        else if (self->kinds && (f = foreign_of(Py_TYPE(a))) != NULL)
            r = (ps->ndim < 0 && f->quick_tag && Py_TYPE(a)->tp_version_tag == f->quick_tag &&
                 ps->typestr != Py_None && cupy_quick(f, a, &ps->fslot, handle, &cur, &vals[i]))
                    ? 1
                    : read_foreign(f, a, ps->typestr == Py_None ? NULL : ps->typestr,
                                   ps->dtype, &ps->fslot, NULL, ps->ndim, self->device,
                                   handle, &cur, &vals[i]);
        else if (self->cai)
            r = bind_cai(self, ps, a, &vals[i]);
        else
            r = 0;
    }
    if (r <= 0) return r;
    PyObject *res = call_fn(l, grid, block, shared, (void *)(uintptr_t)handle, params);
    if (!res) return -1;
    Py_DECREF(res);
    return 1;
}

static PyObject *binder_call(BinderObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->launcher) {
        PyErr_SetString(PyExc_RuntimeError, "Binder was not initialized");
        return NULL;
    }
    if (kwnames || nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "binder(grid, block, shared, stream, args)");
        return NULL;
    }
    unsigned grid[3], block[3];
    if (read_dims(args[0], grid, "grid") || read_dims(args[1], block, "block")) return NULL;
    unsigned long shared = PyLong_AsUnsignedLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    uint64_t handle = 0;
    if (args[3] != Py_None) {
        handle = PyLong_AsUnsignedLongLong(args[3]);
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *fast = PySequence_Fast(args[4], "args must be a sequence");
    if (!fast) return NULL;
    int r = binder_bind(self, grid, block, (unsigned)shared, handle, args[3] != Py_None,
                        PySequence_Fast_ITEMS(fast), PySequence_Fast_GET_SIZE(fast));
    Py_DECREF(fast);
    if (r < 0) return NULL;
    return Py_NewRef(r ? Py_True : Py_False);
}

static PyObject *binder_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    return binder_call((BinderObject *)self, args, nargsf, kwnames);
}

static PyObject *binder_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    BinderObject *self = (BinderObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall_slot = binder_vectorcall;
    return (PyObject *)self;
}

static PyTypeObject BinderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Binder",
    .tp_basicsize = sizeof(BinderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "binder(grid, block, shared, stream, args) -> bool: a checked launch of the "
              "common argument kinds (see _native_launch.c).",
    .tp_new = binder_new,
    .tp_init = (initproc)binder_init,
    .tp_dealloc = (destructor)binder_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BinderObject, vectorcall_slot),
};

/* ---- OutMaker ----------------------------------------------------------------------
 * OutMaker(array_type, shape, dtype, device, nbytes, alloc, free, ctx, ctx_get, ctx_set)
 *   Makes the output array of an allocating hot call in C: nbytes from the stream-ordered
 *   pool (alloc/free: cuMemAllocAsync/cuMemFreeAsync, on the launch stream, with ctx made
 *   current as a launcher does) wrapped in a new array_type instance (DeviceArray: its
 *   __slots__ ptr, shape, dtype, device, stream, _owner, _owns set directly; the memory
 *   goes back to the pool when the instance is collected, as for any DeviceArray).
 *   maker(stream_handle) -> array, or None when the pool refused (the caller's path then
 *   allocates and raises the error).
 */
typedef int (*alloc_fn)(uint64_t *ptr, size_t nbytes, void *stream);
typedef int (*free_fn)(uint64_t ptr, void *stream);

enum { O_PTR, O_SHAPE, O_DTYPE, O_DEVICE, O_STREAM, O_OWNER, O_OWNS, N_OUT };
static const char *out_names[N_OUT] = {"ptr", "shape", "dtype", "device", "stream",
                                       "_owner", "_owns"};

typedef struct {
    PyObject_HEAD
    PyTypeObject *array_type;
    PyObject *shape, *dtype, *device;
    Py_ssize_t offset[N_OUT];
    size_t nbytes;
    alloc_fn alloc;
    free_fn free;
    void *ctx;
    ctx_get_fn ctx_get;
    ctx_set_fn ctx_set;
} OutMakerObject;

static PyTypeObject OutMakerType;

static int maker_init(OutMakerObject *self, PyObject *args, PyObject *kw) {
    PyObject *array_type, *shape, *dtype, *device, *alloc, *freef, *ctx, *get, *set;
    unsigned long long nbytes;
    static char *names[] = {"array_type", "shape", "dtype", "device", "nbytes", "alloc",
                            "free", "ctx", "ctx_get", "ctx_set", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!OO!KOOOOO", names, &PyType_Type,
                                     &array_type, &PyTuple_Type, &shape, &dtype,
                                     &PyLong_Type, &device, &nbytes, &alloc, &freef, &ctx,
                                     &get, &set))
        return -1;
    void *a = as_address(alloc), *f = as_address(freef), *c = as_address(ctx);
    void *g = as_address(get), *st = as_address(set);
    if (PyErr_Occurred()) return -1;
    if (!a || !f || (c && (!g || !st))) {
        PyErr_SetString(PyExc_ValueError, "alloc and free (and ctx_get/ctx_set with a ctx) "
                        "must be non-null addresses");
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)array_type;
    for (int i = 0; i < N_OUT; i++) {
        PyObject *name = PyUnicode_InternFromString(out_names[i]);
        if (!name) return -1;
        Field fld;
        field_init(&fld, t, name);
        Py_DECREF(name);
        if (fld.offset < 0) {
            PyErr_Format(PyExc_TypeError, "array_type: '%s' must be a __slots__ entry",
                         out_names[i]);
            return -1;
        }
        self->offset[i] = fld.offset;
    }
    Py_XSETREF(self->array_type, (PyTypeObject *)Py_NewRef(array_type));
    Py_XSETREF(self->shape, Py_NewRef(shape));
    Py_XSETREF(self->dtype, Py_NewRef(dtype));
    Py_XSETREF(self->device, Py_NewRef(device));
    self->nbytes = (size_t)nbytes;
    self->alloc = (alloc_fn)a;
    self->free = (free_fn)f;
    self->ctx = c;
    self->ctx_get = (ctx_get_fn)g;
    self->ctx_set = (ctx_set_fn)st;
    return 0;
}

static void maker_dealloc(OutMakerObject *self) {
    Py_XDECREF((PyObject *)self->array_type);
    Py_XDECREF(self->shape);
    Py_XDECREF(self->dtype);
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline void set_slot(PyObject *a, Py_ssize_t offset, PyObject *v /* stolen */) {
    PyObject **p = (PyObject **)((char *)a + offset);
    Py_XSETREF(*p, v);
}

/* A new array, NULL with an exception, or NULL without one (the pool refused). */
static PyObject *maker_make(OutMakerObject *m, uint64_t handle) {
    if (!m->alloc) {
        PyErr_SetString(PyExc_RuntimeError, "OutMaker was not initialized");
        return NULL;
    }
    uint64_t ptr = 0;
    int err = 0;
    if (m->ctx) {
        void *cur = NULL;
        if (m->ctx_get(&cur) != 0 || cur != m->ctx) err = m->ctx_set(m->ctx);
    }
    if (!err) err = m->alloc(&ptr, m->nbytes ? m->nbytes : 1, (void *)(uintptr_t)handle);
    if (err) return NULL;
    PyObject *pv = PyLong_FromUnsignedLongLong(ptr);
    PyObject *sv = PyLong_FromUnsignedLongLong(handle);
    PyObject *a = (pv && sv) ? m->array_type->tp_alloc(m->array_type, 0) : NULL;
    if (!a) {
        Py_XDECREF(pv);
        Py_XDECREF(sv);
        m->free(ptr, (void *)(uintptr_t)handle);
        return NULL;
    }
    set_slot(a, m->offset[O_PTR], pv);
    set_slot(a, m->offset[O_SHAPE], Py_NewRef(m->shape));
    set_slot(a, m->offset[O_DTYPE], Py_NewRef(m->dtype));
    set_slot(a, m->offset[O_DEVICE], Py_NewRef(m->device));
    set_slot(a, m->offset[O_STREAM], sv);
    set_slot(a, m->offset[O_OWNER], Py_NewRef(Py_None));
    set_slot(a, m->offset[O_OWNS], Py_NewRef(Py_True)); /* its __del__ frees it */
    return a;
}

static PyObject *maker_call(PyObject *self, PyObject *args, PyObject *kw) {
    unsigned long long handle;
    if (kw || !PyArg_ParseTuple(args, "K", &handle)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "maker(stream_handle)");
        return NULL;
    }
    PyObject *a = maker_make((OutMakerObject *)self, handle);
    if (!a && !PyErr_Occurred()) Py_RETURN_NONE;
    return a;
}

static PyTypeObject OutMakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.OutMaker",
    .tp_basicsize = sizeof(OutMakerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "maker(stream_handle) -> a new device array from the pool (None: refused).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)maker_init,
    .tp_dealloc = (destructor)maker_dealloc,
    .tp_call = maker_call,
};

/* ---- Finalizer ---------------------------------------------------------------------
 * Finalizer(array_type, device, free, ctx, ctx_get, ctx_set, fallback)
 *   DeviceArray's __del__ in C (thork_core._device_array.use_native_finalizer installs it
 *   as the class's __del__): an owning array of `device` gives its memory back to the
 *   stream-ordered pool with cuMemFreeAsync (`free`) on its stream, with `ctx` current
 *   for the call (the thread's own context restored after), and clears its _owns; an array that owns nothing returns at
 *   once. Anything else (another device, a slot that is not the plain value the Python
 *   __del__ expects) calls `fallback(array)`, that Python __del__. Errors are swallowed,
 *   as in a finalizer they must be. It is a method descriptor: `type.__del__` finds it
 *   and the interpreter calls it with the array, with no Python frame. The point: an
 *   allocating fkl call `y = pipe(x)` in a loop frees the previous output each time
 *   (session 8: the Python __del__ with its ctypes call was ~1 us of the 2 us such a call
 *   costs over pipe(x, out=y)).
 */
enum { FIN_PTR, FIN_DEVICE, FIN_STREAM, FIN_OWNS, N_FIN };
static const char *fin_names[N_FIN] = {"ptr", "device", "stream", "_owns"};

typedef struct {
    PyObject_HEAD
    PyTypeObject *array_type;
    PyObject *fallback;
    long device;
    Py_ssize_t offset[N_FIN];
    free_fn free;
    void *ctx;
    ctx_get_fn ctx_get;
    ctx_set_fn ctx_set;
    vectorcallfunc vectorcall;
} FinalizerObject;

static PyTypeObject FinalizerType;

static int fin_init(FinalizerObject *self, PyObject *args, PyObject *kw) {
    PyObject *array_type, *freef, *ctx, *get, *set, *fallback;
    long device;
    static char *names[] = {"array_type", "device", "free", "ctx", "ctx_get", "ctx_set",
                            "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!lOOOOO", names, &PyType_Type, &array_type,
                                     &device, &freef, &ctx, &get, &set, &fallback))
        return -1;
    void *f = as_address(freef), *c = as_address(ctx), *g = as_address(get);
    void *st = as_address(set);
    if (PyErr_Occurred()) return -1;
    if (!f || !c || !g || !st || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_ValueError, "free, ctx, ctx_get and ctx_set must be non-null "
                        "addresses and fallback callable");
        return -1;
    }
    for (int i = 0; i < N_FIN; i++) {
        PyObject *name = PyUnicode_InternFromString(fin_names[i]);
        if (!name) return -1;
        Field fld;
        field_init(&fld, (PyTypeObject *)array_type, name);
        Py_DECREF(name);
        if (fld.offset < 0) {
            PyErr_Format(PyExc_TypeError, "array_type: '%s' must be a __slots__ entry",
                         fin_names[i]);
            return -1;
        }
        self->offset[i] = fld.offset;
    }
    Py_XSETREF(self->array_type, (PyTypeObject *)Py_NewRef(array_type));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    self->device = device;
    self->free = (free_fn)f;
    self->ctx = c;
    self->ctx_get = (ctx_get_fn)g;
    self->ctx_set = (ctx_set_fn)st;
    return 0;
}

static PyObject *fin_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames);

static PyObject *fin_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    FinalizerObject *self = (FinalizerObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = fin_vectorcall;
    return (PyObject *)self;
}

static void fin_dealloc(FinalizerObject *self) {
    Py_XDECREF((PyObject *)self->array_type);
    Py_XDECREF(self->fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline PyObject *fin_slot(PyObject *a, Py_ssize_t offset) { /* borrowed or NULL */
    return *(PyObject **)((char *)a + offset);
}

static PyObject *fin_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    FinalizerObject *f = (FinalizerObject *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "__del__() takes the array alone");
        return NULL;
    }
    PyObject *a = args[0];
    if (!f->array_type || !PyObject_TypeCheck(a, f->array_type))
        return f->fallback ? PyObject_CallOneArg(f->fallback, a) : Py_NewRef(Py_None);
    PyObject *owns = fin_slot(a, f->offset[FIN_OWNS]);
    if (!owns || owns == Py_False) Py_RETURN_NONE; /* a view, or never finished __init__ */
    PyObject *dev = fin_slot(a, f->offset[FIN_DEVICE]);
    PyObject *pv = fin_slot(a, f->offset[FIN_PTR]), *sv = fin_slot(a, f->offset[FIN_STREAM]);
    if (owns != Py_True || !dev || !PyLong_CheckExact(dev) || !pv || !PyLong_CheckExact(pv) ||
        !sv || !PyLong_CheckExact(sv))
        return PyObject_CallOneArg(f->fallback, a);
    long device = PyLong_AsLong(dev);
    uint64_t ptr = PyLong_AsUnsignedLongLong(pv), stream = PyLong_AsUnsignedLongLong(sv);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return PyObject_CallOneArg(f->fallback, a);
    }
    if (device != f->device) return PyObject_CallOneArg(f->fallback, a);
    set_slot(a, f->offset[FIN_OWNS], Py_NewRef(Py_False));
    /* The device's context for the free, then the thread's own again: a finalizer runs
     * wherever the last reference went (another thread, code working on another device). */
    void *cur = NULL;
    int got = f->ctx_get(&cur) == 0, err = 0, switched = 0;
    if (!got || cur != f->ctx) {
        err = f->ctx_set(f->ctx);
        switched = !err;
    }
    if (!err) f->free(ptr, (void *)(uintptr_t)stream); /* a failure has no one to tell */
    if (switched && got) f->ctx_set(cur);
    Py_RETURN_NONE;
}

static PyObject *fin_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj) return Py_NewRef(self);
    return PyMethod_New(self, obj); /* arr.__del__(): bound to the array */
}

static PyTypeObject FinalizerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Finalizer",
    .tp_basicsize = sizeof(FinalizerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "DeviceArray.__del__ in C (see _native_launch.c).",
    .tp_new = fin_new,
    .tp_init = (initproc)fin_init,
    .tp_dealloc = (destructor)fin_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FinalizerObject, vectorcall),
    .tp_descr_get = fin_descr_get,
};

/* ---- GuardedCall ------------------------------------------------------------------
 * A base type for callables whose hottest call, obj(x, out=y) or obj(x, out=y, stream=s),
 * is decided here: when obj._hot_guard is a Guard over two arrays, it is called with
 * (x, y, s); True returns y. Any other call, or a guard that did not launch, goes to
 * obj._miss(*args, **kwargs), the Python implementation. A Python subclass that does not
 * define __call__ inherits the vectorcall entry on Python 3.12+ (on 3.11, tp_call below):
 * the call then builds no argument tuple, keyword dict or Python frame. */

typedef struct {
    PyObject_HEAD
    PyObject *guard; /* _hot_guard: NULL/None, a Guard, or anything else (never tried) */
    vectorcallfunc vectorcall;
    PyObject *maker; /* _hot_out: NULL/None, an OutMaker for obj(x[, stream=s]), or else */
} GuardedCallObject;

static PyTypeObject GuardedCallType;
static PyObject *s_out, *s_miss;

/* The hot try: 1 launched, 0 not (take the general path), -1 error. */
static int guarded_try(GuardedCallObject *self, PyObject *x, PyObject *out,
                       PyObject *stream) {
    PyObject *g = self->guard;
    if (!g || Py_TYPE(g) != &GuardType || ((GuardObject *)g)->n != 2) return 0;
    PyObject *argv[3] = {x, out, stream ? stream : Py_None};
    Py_INCREF(g); /* another thread may replace _hot_guard while the launch has no GIL */
    PyObject *r = guard_call((GuardObject *)g, argv, 3, NULL);
    Py_DECREF(g);
    if (!r) return -1;
    int hit = r == Py_True;
    Py_DECREF(r);
    return hit;
}

/* `name` is interned: an interned exact str `key` equal to it is the same object, so
 * only another str is compared (session 12: `pipe(x, out=y)` compared "out" with
 * "stream" by PyUnicode_Compare, ~80 instructions per call). */
static int is_name(PyObject *key, PyObject *name) {
    if (key == name) return 1;
    if (!PyUnicode_Check(key) || (PyUnicode_CheckExact(key) && PyUnicode_CHECK_INTERNED(key)))
        return 0;
    return PyUnicode_Compare(key, name) == 0;
}

/* The allocating hot try, obj(x) / obj(x, stream=s): the output from _hot_out, then the
 * guard. A new reference to the output when it launched; NULL with an exception on error;
 * NULL without one when the caller's path takes the call (the output, if made, is
 * dropped: its memory goes back to the pool). */
static PyObject *allocating_try(GuardedCallObject *self, PyObject *x, PyObject *stream) {
    PyObject *m = self->maker, *g = self->guard;
    if (!m || Py_TYPE(m) != &OutMakerType || !g || Py_TYPE(g) != &GuardType ||
        ((GuardObject *)g)->n != 2)
        return NULL;
    if (!stream || stream == Py_None) { /* the output belongs on torch's stream: Python */
        const Foreign *f = foreign_of(Py_TYPE(x));
        if (f && f->style == FX_TORCH) return NULL;
    }
    /* held: another thread may replace _hot_out/_hot_guard while Python code runs */
    Py_INCREF(m);
    Py_INCREF(g);
    PyObject *out = NULL;
    uint64_t handle = 0;
    if (stream && stream != Py_None) {
        if (PyLong_CheckExact(stream)) {
            handle = PyLong_AsUnsignedLongLong(stream);
        } else {
            PyObject *h = PyObject_CallOneArg(((GuardObject *)g)->to_handle, stream);
            if (!h) goto done;
            handle = PyLong_AsUnsignedLongLong(h);
            Py_DECREF(h);
        }
        if (PyErr_Occurred()) goto done;
    }
    out = maker_make((OutMakerObject *)m, handle);
    if (out) {
        int hit = guarded_try(self, x, out, stream);
        if (hit <= 0) Py_CLEAR(out);
    }
done:
    Py_DECREF(g);
    Py_DECREF(m);
    return out;
}

static PyObject *guarded_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs == 1 && (nkw == 0 || (nkw == 1 && is_name(PyTuple_GET_ITEM(kwnames, 0),
                                                        s_stream)))) {
        PyObject *out = allocating_try((GuardedCallObject *)self, args[0],
                                       nkw ? args[1] : NULL);
        if (out) return out;
        if (PyErr_Occurred()) return NULL;
    } else if (nargs == 1 && (nkw == 1 || nkw == 2)) {
        PyObject *out = NULL, *stream = NULL;
        for (Py_ssize_t i = 0; i < nkw; i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (is_name(k, s_out)) out = args[1 + i];
            else if (is_name(k, s_stream)) stream = args[1 + i];
        }
        if (out && (nkw == 1 || stream)) {
            int hit = guarded_try((GuardedCallObject *)self, args[0], out, stream);
            if (hit < 0) return NULL;
            if (hit) return Py_NewRef(out);
        }
    }
    PyObject *miss = PyObject_GetAttr(self, s_miss);
    if (!miss) return NULL;
    PyObject *r = PyObject_Vectorcall(miss, args, nargs, kwnames);
    Py_DECREF(miss);
    return r;
}

static PyObject *guarded_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nkw = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    PyObject *only_stream = nkw == 1 ? PyDict_GetItemWithError(kwargs, s_stream) : NULL;
    if (PyErr_Occurred()) return NULL;
    if (PyTuple_GET_SIZE(args) == 1 && (nkw == 0 || only_stream)) {
        PyObject *out = allocating_try((GuardedCallObject *)self, PyTuple_GET_ITEM(args, 0),
                                       only_stream);
        if (out) return out;
        if (PyErr_Occurred()) return NULL;
    } else if (PyTuple_GET_SIZE(args) == 1 && (nkw == 1 || nkw == 2)) {
        PyObject *out = PyDict_GetItemWithError(kwargs, s_out); /* borrowed */
        PyObject *stream = out ? PyDict_GetItemWithError(kwargs, s_stream) : NULL;
        if (PyErr_Occurred()) return NULL;
        if (out && (nkw == 1 || stream)) {
            int hit = guarded_try((GuardedCallObject *)self, PyTuple_GET_ITEM(args, 0), out,
                                  stream);
            if (hit < 0) return NULL;
            if (hit) return Py_NewRef(out);
        }
    }
    PyObject *miss = PyObject_GetAttr(self, s_miss);
    if (!miss) return NULL;
    PyObject *r = PyObject_Call(miss, args, kwargs);
    Py_DECREF(miss);
    return r;
}

static PyObject *guarded_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    GuardedCallObject *self = (GuardedCallObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = guarded_vectorcall;
    return (PyObject *)self;
}

static int guarded_traverse(GuardedCallObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->guard);
    Py_VISIT(self->maker);
    return 0;
}

static int guarded_clear(GuardedCallObject *self) {
    Py_CLEAR(self->guard);
    Py_CLEAR(self->maker);
    return 0;
}

static void guarded_dealloc(GuardedCallObject *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->maker);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef guarded_members[] = {
    {"_hot_guard", T_OBJECT, offsetof(GuardedCallObject, guard), 0,
     "The Guard tried first by obj(x, out=y[, stream=s]) (None: none yet)."},
    {"_hot_out", T_OBJECT, offsetof(GuardedCallObject, maker), 0,
     "The OutMaker of obj(x[, stream=s]): its output, then _hot_guard (None: none)."},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject GuardedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.GuardedCall",
    .tp_basicsize = sizeof(GuardedCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of a callable whose call obj(x, out=y[, stream=s]) tries "
              "obj._hot_guard in C first; anything else goes to obj._miss(*args, **kw).",
    .tp_new = guarded_new,
    .tp_dealloc = (destructor)guarded_dealloc,
    .tp_traverse = (traverseproc)guarded_traverse,
    .tp_clear = (inquiry)guarded_clear,
    .tp_call = guarded_tp_call,
    .tp_vectorcall_offset = offsetof(GuardedCallObject, vectorcall),
    .tp_members = guarded_members,
};

/* ---- LaunchCall -------------------------------------------------------------------
 * A base type for kernel[grid, block] objects: obj(*args) / obj(*args, stream=s) is
 * decided here once obj._arm(binder, grid, block, shared, to_handle) has been called: the
 * Binder checks the arguments and launches with the armed geometry (stream: None, an int
 * handle, or what to_handle turns into one). Any other call (other keywords, a stream the
 * C code cannot read, a binder miss) goes to obj._miss(*args, **kwargs), the Python
 * implementation, which also arms the object when the kernel's calls can be decided
 * here. _arm(None, ...) disarms. */

typedef struct {
    PyObject_HEAD
    PyObject *binder; /* NULL/None: not armed */
    vectorcallfunc vectorcall;
    PyObject *to_handle;
    unsigned grid[3], block[3], shared;
} LaunchCallObject;

static PyTypeObject LaunchCallType;
static PyObject *s_stream_names; /* ("stream",) */

static PyObject *launchcall_miss(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    PyObject *miss = PyObject_GetAttr(self, s_miss);
    if (!miss) return NULL;
    PyObject *r = PyObject_Vectorcall(miss, args, nargsf & ~PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      kwnames);
    Py_DECREF(miss);
    return r;
}

static PyObject *launchcall_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames) {
    LaunchCallObject *self = (LaunchCallObject *)self_;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *b = self->binder;
    if (b && Py_TYPE(b) == &BinderType &&
        (nkw == 0 || (nkw == 1 && is_name(PyTuple_GET_ITEM(kwnames, 0), s_stream)))) {
        PyObject *s = nkw ? args[nargs] : Py_None;
        uint64_t handle = 0;
        int ok = 1;
        if (s != Py_None) {
            if (PyLong_CheckExact(s)) {
                handle = PyLong_AsUnsignedLongLong(s);
                if (PyErr_Occurred()) { /* negative or too large: Python names it */
                    PyErr_Clear();
                    ok = 0;
                }
            } else if (self->to_handle) {
                PyObject *h = PyObject_CallOneArg(self->to_handle, s);
                if (!h) return NULL; /* the same error the Python path raises */
                if (PyLong_CheckExact(h)) handle = PyLong_AsUnsignedLongLong(h);
                else ok = 0;
                Py_DECREF(h);
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    ok = 0;
                }
            } else {
                ok = 0;
            }
        }
        if (ok) {
            /* copies: another thread may re-arm while the launch runs without the GIL */
            unsigned grid[3] = {self->grid[0], self->grid[1], self->grid[2]};
            unsigned block[3] = {self->block[0], self->block[1], self->block[2]};
            unsigned shared = self->shared;
            Py_INCREF(b);
            int r = binder_bind((BinderObject *)b, grid, block, shared, handle, s != Py_None,
                                args, nargs);
            Py_DECREF(b);
            if (r < 0) return NULL;
            if (r) Py_RETURN_NONE;
        }
    }
    return launchcall_miss(self_, args, nargsf, kwnames);
}

/* Python 3.11 does not give heap subclasses the vectorcall entry: the same call from a
 * tuple and a dict (no keywords, or stream= alone, takes the hot try). */
static PyObject *launchcall_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    Py_ssize_t nkw = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    if (nkw == 0) return launchcall_vectorcall(self, &PyTuple_GET_ITEM(args, 0), nargs, NULL);
    PyObject *stream = nkw == 1 ? PyDict_GetItemWithError(kwargs, s_stream) : NULL;
    if (PyErr_Occurred()) return NULL;
    if (stream && nargs < MAX_PARAMS) {
        PyObject *argv[MAX_PARAMS + 1];
        for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = PyTuple_GET_ITEM(args, i);
        argv[nargs] = stream;
        return launchcall_vectorcall(self, argv, nargs, s_stream_names);
    }
    PyObject *miss = PyObject_GetAttr(self, s_miss);
    if (!miss) return NULL;
    PyObject *r = PyObject_Call(miss, args, kwargs);
    Py_DECREF(miss);
    return r;
}

static PyObject *launchcall_arm(LaunchCallObject *self, PyObject *const *args,
                                Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_arm(binder, grid, block, shared, to_handle)");
        return NULL;
    }
    if (args[0] == Py_None) {
        Py_CLEAR(self->binder);
        Py_RETURN_NONE;
    }
    if (Py_TYPE(args[0]) != &BinderType) {
        PyErr_SetString(PyExc_TypeError, "_arm: binder must be a Binder or None");
        return NULL;
    }
    unsigned grid[3], block[3];
    if (read_dims(args[1], grid, "grid") || read_dims(args[2], block, "block")) return NULL;
    unsigned long shared = PyLong_AsUnsignedLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (shared > 0xFFFFFFFFUL) {
        PyErr_SetString(PyExc_OverflowError, "_arm: shared beyond 32 bits");
        return NULL;
    }
    if (args[4] != Py_None && !PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "_arm: to_handle must be callable or None");
        return NULL;
    }
    memcpy(self->grid, grid, sizeof grid);
    memcpy(self->block, block, sizeof block);
    self->shared = (unsigned)shared;
    Py_XSETREF(self->to_handle, args[4] == Py_None ? NULL : Py_NewRef(args[4]));
    Py_XSETREF(self->binder, Py_NewRef(args[0]));
    Py_RETURN_NONE;
}

static PyObject *launchcall_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    LaunchCallObject *self = (LaunchCallObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = launchcall_vectorcall;
    return (PyObject *)self;
}

static int launchcall_traverse(LaunchCallObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->binder);
    Py_VISIT(self->to_handle);
    return 0;
}

static int launchcall_clear(LaunchCallObject *self) {
    Py_CLEAR(self->binder);
    Py_CLEAR(self->to_handle);
    return 0;
}

static void launchcall_dealloc(LaunchCallObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->binder);
    Py_CLEAR(self->to_handle);
    tp->tp_free((PyObject *)self);
}

static PyMethodDef launchcall_methods[] = {
    {"_arm", (PyCFunction)(void (*)(void))launchcall_arm, METH_FASTCALL,
     "_arm(binder, grid, block, shared, to_handle): calls are decided by binder in C "
     "(binder None: every call goes to _miss)."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef launchcall_members[] = {
    {"_hot_binder", T_OBJECT, offsetof(LaunchCallObject, binder), READONLY,
     "The armed Binder (None: not armed)."},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject LaunchCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.LaunchCall",
    .tp_basicsize = sizeof(LaunchCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of kernel[grid, block]: once _arm()ed, obj(*args[, stream=s]) is bound "
              "and launched in C; anything else goes to obj._miss(*args, **kw).",
    .tp_new = launchcall_new,
    .tp_dealloc = (destructor)launchcall_dealloc,
    .tp_traverse = (traverseproc)launchcall_traverse,
    .tp_clear = (inquiry)launchcall_clear,
    .tp_call = launchcall_tp_call,
    .tp_vectorcall_offset = offsetof(LaunchCallObject, vectorcall),
    .tp_methods = launchcall_methods,
    .tp_members = launchcall_members,
};

/* ---- Subscript (session 11; recent configurations: session 12) ----------------------
 * Subscript(attr, fallback): installed as a class's __getitem__ (thork's Kernel): obj[key]
 * returns obj.<attr>[key] when key is a plain configuration, a tuple of 2 or 3 entries each
 * an exact int or a tuple of exact ints, and the dict obj.<attr> holds it; every other
 * subscript (a miss, NumPy ints, floats or bools equal to ints, a list) is
 * fallback(obj, key), the Python implementation, which also fills the dict (with plain
 * configurations only). The exact-type test comes first: a dict finds (1.0, 32) or
 * (True, 32) under (1, 32) (equal hashes and values), which must not reach the launch
 * checked for the ints. A method descriptor: the subscript slot calls it with (obj, key),
 * no bound method and no Python frame.
 *
 * Recent configurations (session 12): the attribute look-up and the dict look-up (hashing
 * the key tuple) were ~420 of the subscript's ~780 instructions. Each value found in the
 * dict is also kept in a small table of recent (object, key, value) entries, the object
 * and the value held by weak references (the table keeps nothing alive), the key tuple
 * by a strong one; a subscript first scans that table: the same key tuple (a constant
 * `kernel[2, 128]`), else a key of the same shape whose entries are exact ints of equal
 * value (`kernel[g, b]` builds a new tuple each call), for this very object, whose value
 * is still alive. The dict is add-only for plain keys (thork's Kernel._launches): a value
 * once found under a plain key is what the dict holds for that key while the value lives.
 * Values that take no weak reference are never kept. Under the GIL an entry is replaced
 * in one step with no Python code in between; where there is no GIL the table is off.
 *
 * install(cls) sets cls.__getitem__ to this Subscript and points the class's own mapping
 * slot (mp_subscript) at it directly (CPython's generic slot looks __getitem__ up in the
 * type and calls it, ~130 instructions); any later assignment of cls.__getitem__ makes
 * CPython recompute the slot, as for any class. */

#define SUBSCRIPT_RECENT 8

typedef struct {
    PyObject *obj_ref;   /* weak reference to the subscripted object */
    PyObject *key;       /* the plain key tuple (strong) */
    PyObject *value_ref; /* weak reference to what obj.<attr>[key] was */
} RecentEntry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *attr, *fallback;
    RecentEntry recent[SUBSCRIPT_RECENT];
    unsigned next; /* the entry replaced next (round robin) */
} SubscriptObject;

static PyTypeObject SubscriptType;

static int plain_config(PyObject *key) {
    if (!PyTuple_CheckExact(key)) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(key);
    if (n < 2 || n > 3) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(key, i);
        if (PyLong_CheckExact(x)) continue;
        if (!PyTuple_CheckExact(x)) return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(x); j++)
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(x, j))) return 0;
    }
    return 1;
}

/* The referent of a weak reference, borrowed, or NULL when it is gone. */
static inline PyObject *weak_target(PyObject *ref) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    if (PyWeakref_GetRef(ref, &obj) <= 0) return NULL;
    Py_DECREF(obj); /* alive before the call: still referenced elsewhere */
    return obj;
#else
    PyObject *obj = PyWeakref_GET_OBJECT(ref);
    return obj == Py_None ? NULL : obj;
#endif
}

/* Whether y is an exact int equal to x (an exact int). */
static int same_int(PyObject *x, PyObject *y) {
    if (x == y) return 1;
    if (!PyLong_CheckExact(y)) return 0;
    int ox, oy;
    long a = PyLong_AsLongAndOverflow(x, &ox), b = PyLong_AsLongAndOverflow(y, &oy);
    if (!ox && !oy) return a == b;
    int eq = PyObject_RichCompareBool(x, y, Py_EQ); /* exact ints: no Python code */
    if (eq < 0) PyErr_Clear();
    return eq == 1;
}

/* Whether key is a plain configuration of the same shape and values as plain (a plain
 * configuration): exact ints where plain has ints, tuples of as many exact ints where it
 * has tuples. Equal configurations of another shape ((2,) for 2) are not the same key. */
static int same_config(PyObject *plain, PyObject *key) {
    if (!PyTuple_CheckExact(key)) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(plain);
    if (PyTuple_GET_SIZE(key) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(plain, i), *y = PyTuple_GET_ITEM(key, i);
        if (x == y) continue;
        if (PyLong_CheckExact(x)) {
            if (!same_int(x, y)) return 0;
            continue;
        }
        if (!PyTuple_CheckExact(y) || PyTuple_GET_SIZE(y) != PyTuple_GET_SIZE(x)) return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(x); j++)
            if (!same_int(PyTuple_GET_ITEM(x, j), PyTuple_GET_ITEM(y, j))) return 0;
    }
    return 1;
}

/* The value of a recent entry for (obj, key), a new reference, or NULL. */
static PyObject *subscript_recent(SubscriptObject *self, PyObject *obj, PyObject *key) {
#ifdef Py_GIL_DISABLED
    (void)self; (void)obj; (void)key;
    return NULL;
#else
    for (unsigned i = 0; i < SUBSCRIPT_RECENT; i++) {
        RecentEntry *e = &self->recent[i];
        if (!e->key || weak_target(e->obj_ref) != obj) continue;
        if (e->key != key && !same_config(e->key, key)) continue;
        PyObject *value = weak_target(e->value_ref);
        if (value) return Py_NewRef(value);
    }
    return NULL;
#endif
}

/* Keep (obj, key, value) as a recent entry (key: plain; value: a new reference the
 * caller keeps); nothing when obj or value takes no weak reference. */
static void subscript_remember(SubscriptObject *self, PyObject *obj, PyObject *key,
                               PyObject *value) {
#ifdef Py_GIL_DISABLED
    (void)self; (void)obj; (void)key; (void)value;
#else
    PyObject *obj_ref = PyWeakref_NewRef(obj, NULL);
    if (!obj_ref) {
        PyErr_Clear();
        return;
    }
    PyObject *value_ref = PyWeakref_NewRef(value, NULL);
    if (!value_ref) {
        PyErr_Clear();
        Py_DECREF(obj_ref);
        return;
    }
    /* the references are made: from here to the swap no Python code runs */
    RecentEntry *e = &self->recent[self->next];
    self->next = (self->next + 1) % SUBSCRIPT_RECENT;
    RecentEntry old = *e;
    e->obj_ref = obj_ref;
    e->key = Py_NewRef(key);
    e->value_ref = value_ref;
    Py_XDECREF(old.obj_ref);
    Py_XDECREF(old.key);
    Py_XDECREF(old.value_ref);
#endif
}

static PyObject *subscript_get(SubscriptObject *self, PyObject *obj, PyObject *key) {
    PyObject *hit = subscript_recent(self, obj, key);
    if (hit) return hit;
    if (plain_config(key)) {
        PyObject *memo = PyObject_GetAttr(obj, self->attr);
        if (!memo) {
            PyErr_Clear(); /* the fallback says what is wrong */
        } else {
            hit = PyDict_CheckExact(memo) ? PyDict_GetItemWithError(memo, key)
                                          : NULL; /* borrowed */
            Py_XINCREF(hit);
            Py_DECREF(memo);
            if (hit) {
                subscript_remember(self, obj, key, hit);
                return hit;
            }
            if (PyErr_Occurred()) return NULL;
        }
    }
    PyObject *args[2] = {obj, key};
    return PyObject_Vectorcall(self->fallback, args, 2, NULL);
}

static PyObject *subscript_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
    SubscriptObject *self = (SubscriptObject *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->fallback || !self->attr) { /* made by __new__ alone: never dereference */
        PyErr_SetString(PyExc_RuntimeError, "Subscript was not initialized");
        return NULL;
    }
    if (!kwnames && nargs == 2) return subscript_get(self, args[0], args[1]);
    return PyObject_Vectorcall(self->fallback, args, nargsf & ~PY_VECTORCALL_ARGUMENTS_OFFSET,
                               kwnames);
}

/* The class install() last pointed at its Subscript, and that Subscript (strong). */
static PyTypeObject *subscript_installed_type;
static SubscriptObject *subscript_installed;
static PyObject *s_getitem;

/* mp_subscript of a class install()ed: its Subscript without the type look-up. Any other
 * type reaching it (a class installed before the last install) looks __getitem__ up. */
static PyObject *subscript_slot(PyObject *obj, PyObject *key) {
    if (Py_TYPE(obj) == subscript_installed_type && subscript_installed)
        return subscript_get(subscript_installed, obj, key);
    PyObject *method = PyObject_GetAttr((PyObject *)Py_TYPE(obj), s_getitem);
    if (!method) return NULL;
    PyObject *args[2] = {obj, key};
    PyObject *got = PyObject_Vectorcall(method, args, 2, NULL);
    Py_DECREF(method);
    return got;
}

static PyObject *subscript_install(SubscriptObject *self, PyObject *cls) {
    if (!self->fallback || !self->attr) {
        PyErr_SetString(PyExc_RuntimeError, "Subscript was not initialized");
        return NULL;
    }
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_Format(PyExc_TypeError, "Subscript.install: cls must be a class defined in "
                     "Python, got %R", cls);
        return NULL;
    }
    if (PyObject_SetAttr(cls, s_getitem, (PyObject *)self) < 0) return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_as_mapping != &((PyHeapTypeObject *)type)->as_mapping)
        Py_RETURN_NONE; /* not laid out as type() makes classes: the generic slot serves */
    Py_INCREF(cls);
    Py_INCREF(self);
    PyTypeObject *old_type = subscript_installed_type;
    SubscriptObject *old = subscript_installed;
    subscript_installed_type = type;
    subscript_installed = self;
    type->tp_as_mapping->mp_subscript = subscript_slot;
    Py_XDECREF(old_type);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static int subscript_init(SubscriptObject *self, PyObject *args, PyObject *kw) {
    PyObject *attr, *fallback;
    static char *names[] = {"attr", "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UO", names, &attr, &fallback)) return -1;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "Subscript: fallback must be callable");
        return -1;
    }
    Py_INCREF(attr);
    PyUnicode_InternInPlace(&attr);
    Py_XSETREF(self->attr, attr);
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    return 0;
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    SubscriptObject *self = (SubscriptObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = subscript_vectorcall;
    return (PyObject *)self;
}

static PyObject *subscript_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Subscript takes (obj, key)");
        return NULL;
    }
    return subscript_vectorcall(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), NULL);
}

static PyObject *subscript_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *subscript_forget(SubscriptObject *self, PyObject *unused) {
    (void)unused;
    for (unsigned i = 0; i < SUBSCRIPT_RECENT; i++) {
        RecentEntry old = self->recent[i];
        self->recent[i] = (RecentEntry){NULL, NULL, NULL};
        Py_XDECREF(old.obj_ref);
        Py_XDECREF(old.key);
        Py_XDECREF(old.value_ref);
    }
    self->next = 0;
    Py_RETURN_NONE;
}

static PyObject *subscript_recent_count(SubscriptObject *self, PyObject *unused) {
    (void)unused;
    long n = 0;
    for (unsigned i = 0; i < SUBSCRIPT_RECENT; i++)
        n += self->recent[i].key && weak_target(self->recent[i].value_ref) != NULL;
    return PyLong_FromLong(n);
}

static int subscript_traverse(SubscriptObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->attr);
    Py_VISIT(self->fallback);
    for (unsigned i = 0; i < SUBSCRIPT_RECENT; i++) {
        Py_VISIT(self->recent[i].obj_ref);
        Py_VISIT(self->recent[i].key);
        Py_VISIT(self->recent[i].value_ref);
    }
    return 0;
}

static int subscript_clear(SubscriptObject *self) {
    Py_CLEAR(self->attr);
    Py_CLEAR(self->fallback);
    for (unsigned i = 0; i < SUBSCRIPT_RECENT; i++) {
        Py_CLEAR(self->recent[i].obj_ref);
        Py_CLEAR(self->recent[i].key);
        Py_CLEAR(self->recent[i].value_ref);
    }
    return 0;
}

static void subscript_dealloc(SubscriptObject *self) {
    PyObject_GC_UnTrack(self);
    subscript_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef subscript_methods[] = {
    {"install", (PyCFunction)subscript_install, METH_O,
     "install(cls): cls.__getitem__ = self, with cls's mapping slot pointed at it "
     "directly (no type look-up per subscript)."},
    {"forget", (PyCFunction)subscript_forget, METH_NOARGS,
     "forget(): drop the recent configurations (the dicts are not touched)."},
    {"recent", (PyCFunction)subscript_recent_count, METH_NOARGS,
     "recent(): how many recent configurations are kept whose value is alive."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef subscript_members[] = {
    {"fallback", T_OBJECT, offsetof(SubscriptObject, fallback), READONLY,
     "fallback(obj, key): every subscript the memo does not answer."},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject SubscriptType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Subscript",
    .tp_basicsize = sizeof(SubscriptObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Subscript(attr, fallback): a class's __getitem__ answering plain "
              "configurations from the dict obj.<attr> in C (see _native_launch.c).",
    .tp_new = subscript_new,
    .tp_init = (initproc)subscript_init,
    .tp_dealloc = (destructor)subscript_dealloc,
    .tp_traverse = (traverseproc)subscript_traverse,
    .tp_clear = (inquiry)subscript_clear,
    .tp_call = subscript_tp_call,
    .tp_descr_get = subscript_descr_get,
    .tp_vectorcall_offset = offsetof(SubscriptObject, vectorcall),
    .tp_methods = subscript_methods,
    .tp_members = subscript_members,
};

/* ---- GraphLaunch (h-interop; separate from the launchers above) ---------------------
 * GraphLaunch(fn, exec, stream, slow, on_error)
 *   Graph.replay in one C call: fn is cuGraphLaunch's address, exec the CUgraphExec,
 *   stream the default replay stream (raw handles as ints). g() / g(None) replays on the
 *   default stream, g(int) on that raw handle; any other argument (a stream object,
 *   keywords) goes to slow(*args, **kw), the Python replay, as does a call after close().
 *   A nonzero driver code calls on_error(code), which raises.
 */
typedef int (*graph_launch_fn)(void *exec, void *stream);

typedef struct {
    PyObject_HEAD
    graph_launch_fn fn;
    void *exec;
    void *stream;
    PyObject *slow;
    PyObject *on_error;
    vectorcallfunc vectorcall_slot;
} GraphLaunchObject;

static PyObject *graph_launch_vectorcall(PyObject *o, PyObject *const *args, size_t nargsf,
                                         PyObject *kwnames) {
    GraphLaunchObject *self = (GraphLaunchObject *)o;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    void *stream = self->stream;
    if (!self->exec || kwnames || nargs > 1) goto slow;
    if (nargs == 1 && args[0] != Py_None) {
        if (!PyLong_CheckExact(args[0])) goto slow;
        stream = (void *)(uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
        if (PyErr_Occurred()) return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = self->fn(self->exec, stream);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *r = PyObject_CallFunction(self->on_error, "i", err);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static int graph_launch_init(GraphLaunchObject *self, PyObject *args, PyObject *kw) {
    unsigned long long fn, exec, stream;
    PyObject *slow, *on_error;
    static char *names[] = {"fn", "exec", "stream", "slow", "on_error", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKOO", names, &fn, &exec, &stream, &slow,
                                     &on_error))
        return -1;
    if (!fn || !exec || !PyCallable_Check(slow) || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_ValueError,
                        "GraphLaunch: fn and exec must be nonzero, slow and on_error callable");
        return -1;
    }
    self->fn = (graph_launch_fn)(uintptr_t)fn;
    self->exec = (void *)(uintptr_t)exec;
    self->stream = (void *)(uintptr_t)stream;
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    Py_INCREF(on_error);
    Py_XSETREF(self->on_error, on_error);
    return 0;
}

static PyObject *graph_launch_close(GraphLaunchObject *self, PyObject *unused) {
    (void)unused;
    self->exec = NULL; /* later calls take the slow path, which refuses a closed graph */
    Py_RETURN_NONE;
}

static PyMethodDef graph_launch_methods[] = {
    {"close", (PyCFunction)graph_launch_close, METH_NOARGS,
     "forget the graph: later calls go to the Python replay"},
    {NULL, NULL, 0, NULL},
};

static void graph_launch_dealloc(GraphLaunchObject *self) {
    Py_XDECREF(self->slow);
    Py_XDECREF(self->on_error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *graph_launch_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    GraphLaunchObject *self = (GraphLaunchObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall_slot = graph_launch_vectorcall;
    return (PyObject *)self;
}

static PyTypeObject GraphLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.GraphLaunch",
    .tp_basicsize = sizeof(GraphLaunchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "GraphLaunch(fn, exec, stream, slow, on_error): Graph.replay in C "
              "(see _native_launch.c).",
    .tp_new = graph_launch_new,
    .tp_init = (initproc)graph_launch_init,
    .tp_dealloc = (destructor)graph_launch_dealloc,
    .tp_methods = graph_launch_methods,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GraphLaunchObject, vectorcall_slot),
};

/* ---- dlpack_read ------------------------------------------------------------------
 * dlpack_read(capsule) -> (address, shape, code, bits, device_type, device_id, strides,
 *                          readonly) or None
 * The DLTensor in an unconsumed "dltensor" / "dltensor_versioned" capsule, read in one C
 * call (ctypes takes microseconds for the same fields): address is data + byte_offset,
 * strides a tuple in elements or None (no strides: compact row-major). None for another
 * capsule or a vector dtype (lanes != 1): the caller's adapters say why. The capsule is
 * left as it was (its destructor still releases the producer's memory). The layouts are
 * DLPack's (dlpack.h, ABI 1.x). */

static PyObject *dlpack_read(PyObject *self, PyObject *capsule) {
    (void)self;
    const DLTens *t;
    uint32_t major;
    int readonly;
    int got = dl_tensor(capsule, &t, &major, &readonly);
    /* another ABI major's layout is not read (the protocol: a consumer must not) */
    if (!got || (got == 2 && major != 1)) Py_RETURN_NONE;
    if (t->dtype.lanes != 1 || t->ndim < 0 || (t->ndim > 0 && !t->shape)) Py_RETURN_NONE;
    PyObject *shape = PyTuple_New(t->ndim), *strides = NULL, *r = NULL;
    if (!shape) return NULL;
    for (int32_t i = 0; i < t->ndim; i++) {
        PyObject *n = PyLong_FromLongLong(t->shape[i]);
        if (!n) goto done;
        PyTuple_SET_ITEM(shape, i, n);
    }
    if (t->strides) {
        if (!(strides = PyTuple_New(t->ndim))) goto done;
        for (int32_t i = 0; i < t->ndim; i++) {
            PyObject *n = PyLong_FromLongLong(t->strides[i]);
            if (!n) goto done;
            PyTuple_SET_ITEM(strides, i, n);
        }
    } else {
        strides = Py_None;
        Py_INCREF(strides);
    }
    r = Py_BuildValue("(KOiiiiOO)",
                      (unsigned long long)((uintptr_t)t->data + t->byte_offset), shape,
                      (int)t->dtype.code, (int)t->dtype.bits, (int)t->device.device_type,
                      (int)t->device.device_id, strides, readonly ? Py_True : Py_False);
done:
    Py_DECREF(shape);
    Py_XDECREF(strides);
    return r;
}

/* ---- dlpack_export ----------------------------------------------------------------
 * dlpack_export(owner, address, shape, strides, code, bits, device_id, versioned)
 *     -> capsule
 * DeviceArray.__dlpack__'s capsule, built in one C call (ctypes structures and Python
 * callbacks took ~10 us per export): one malloc'd block holds the managed tensor (DLPack
 * 1.x "dltensor_versioned" when versioned, else the legacy "dltensor"), its shape and its
 * strides (a tuple in elements, or None: compact row-major). The tensor is CUDA memory of
 * device device_id (kDLCUDA), writable (flags 0). manager_ctx holds a strong reference
 * to owner (the array), dropped by the deleter, which any thread may call (it takes the
 * GIL; after interpreter shutdown it only frees the block). The capsule's destructor calls
 * the deleter when nobody consumed the capsule (a consumer renames it "used_dltensor*"
 * and calls the deleter itself). dlpack_exports() -> int: the exports whose deleter has
 * not run yet (tests of the keep-alive). */
static Py_ssize_t dl_live; /* changed with the GIL held */

static void dl_release(PyObject *owner, void *block) {
    if (Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        Py_XDECREF(owner);
        dl_live--;
        PyGILState_Release(st);
    }
    free(block);
}

/* dl_release where the GIL is held (a capsule's destructor: CPython runs it with the
 * GIL): no PyGILState round trip (session 12, ~100 instructions per export). */
static void dl_release_held(PyObject *owner, void *block) {
    if (Py_IsInitialized()) {
        Py_XDECREF(owner);
        dl_live--;
    }
    free(block);
}

static void dl_deleter_v(void *m) { dl_release((PyObject *)((DLManagedV *)m)->ctx, m); }
static void dl_deleter(void *m) { dl_release((PyObject *)((DLManaged *)m)->ctx, m); }

static const char DL_NAME_V[] = "dltensor_versioned", DL_NAME[] = "dltensor";

static void dl_capsule_destructor(PyObject *capsule) {
    /* The capsule is ours (legal): GetName sets no exception (an exception may be pending
     * here: nothing is cleared); a consumer that took the tensor renamed it "used_...".
     * Session 12: the name read once (IsValid then GetPointer compared it twice). */
    const char *name = PyCapsule_GetName(capsule);
    if (!name) return;
    if (name == DL_NAME_V || strcmp(name, DL_NAME_V) == 0) {
        DLManagedV *m = PyCapsule_GetPointer(capsule, name);
        if (m && m->deleter == dl_deleter_v) dl_release_held((PyObject *)m->ctx, m);
        else if (m && m->deleter) m->deleter(m);
    } else if (name == DL_NAME || strcmp(name, DL_NAME) == 0) {
        DLManaged *m = PyCapsule_GetPointer(capsule, name);
        if (m && m->deleter == dl_deleter) dl_release_held((PyObject *)m->ctx, m);
        else if (m && m->deleter) m->deleter(m);
    }
}

/* The int64 values of a tuple of ints into out[n]; -1 with an exception otherwise. */
static int dl_dims(PyObject *t, Py_ssize_t n, int64_t *out, const char *what) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_TypeError, "dlpack_export: %s must be a tuple of %zd ints", what,
                     n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        out[i] = (int64_t)v;
    }
    return 0;
}

static PyObject *dlpack_export(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "dlpack_export takes 8 arguments");
        return NULL;
    }
    PyObject *owner = args[0], *shape = args[2], *strides = args[3];
    unsigned long long addr = PyLong_AsUnsignedLongLong(args[1]);
    if (addr == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    long code = PyLong_AsLong(args[4]), bits = PyLong_AsLong(args[5]);
    long device = PyLong_AsLong(args[6]);
    int versioned = PyObject_IsTrue(args[7]);
    if (PyErr_Occurred() || versioned < 0) return NULL;
    if (!PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "dlpack_export: shape must be a tuple");
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    int has_strides = strides != Py_None;
    size_t head = versioned ? sizeof(DLManagedV) : sizeof(DLManaged);
    head = (head + 7) & ~(size_t)7;
    char *block = malloc(head + sizeof(int64_t) * (size_t)(ndim ? ndim : 1) * 2);
    if (!block) return PyErr_NoMemory();
    int64_t *dims = (int64_t *)(block + head), *steps = dims + (ndim ? ndim : 1);
    if (dl_dims(shape, ndim, dims, "shape") < 0 ||
        (has_strides && dl_dims(strides, ndim, steps, "strides") < 0)) {
        free(block);
        return NULL;
    }
    DLTens *t;
    if (versioned) {
        DLManagedV *m = (DLManagedV *)block;
        m->major = 1;
        m->minor = 0;
        m->ctx = owner;
        m->deleter = dl_deleter_v;
        m->flags = 0;
        t = &m->t;
    } else {
        DLManaged *m = (DLManaged *)block;
        m->ctx = owner;
        m->deleter = dl_deleter;
        t = &m->t;
    }
    t->data = (void *)(uintptr_t)addr;
    t->device.device_type = 2; /* kDLCUDA */
    t->device.device_id = (int32_t)device;
    t->ndim = (int32_t)ndim;
    t->dtype.code = (uint8_t)code;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = 1;
    t->shape = dims;
    t->strides = has_strides ? steps : NULL;
    t->byte_offset = 0;
    PyObject *capsule = PyCapsule_New(block, versioned ? DL_NAME_V : DL_NAME,
                                      dl_capsule_destructor);
    if (!capsule) {
        free(block);
        return NULL;
    }
    Py_INCREF(owner);
    dl_live++;
    return capsule;
}

static PyObject *dlpack_exports(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromSsize_t(dl_live);
}

static PyObject *keeps_gil(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(alone());
}

static PyObject *noop(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames) {
    (void)self;
    (void)args;
    (void)nargs;
    (void)kwnames;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop(*args, **kwargs) -> None: does nothing; the benches' CPython call floor (what "
     "the language costs for a call of the same shape into C)."},
    {"keeps_gil", (PyCFunction)keeps_gil, METH_NOARGS,
     "keeps_gil(): whether a launch from this thread now keeps the GIL (the only thread "
     "state of the only interpreter; see call_fn)."},
    {"dlpack_read", (PyCFunction)dlpack_read, METH_O,
     "dlpack_read(capsule): the DLTensor's fields, or None (see _native_launch.c)."},
    {"dlpack_export", (PyCFunction)(void (*)(void))dlpack_export, METH_FASTCALL,
     "dlpack_export(owner, address, shape, strides, code, bits, device_id, versioned): "
     "a DLPack capsule (see _native_launch.c)."},
    {"dlpack_exports", (PyCFunction)dlpack_exports, METH_NOARGS,
     "dlpack_exports(): exports whose deleter has not run yet."},
    {"foreign", (PyCFunction)(void (*)(void))foreign_register, METH_FASTCALL,
     "foreign(type, style, current, dtypes): read arrays of exactly `type` through their "
     "own attributes (see _native_launch.c); foreign(): forget every such type."},
    {"foreign_reading", (PyCFunction)foreign_reading, METH_O,
     "foreign_reading(type): None, 'cupy', 'torch' (read in Python) or 'c' (a C reader)."},
    {NULL, NULL, 0, NULL}};

static PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_thork_native",
    "Thork's launcher in C (see _native_launch.c).", -1, module_methods, NULL, NULL, NULL,
    NULL};

PyMODINIT_FUNC PyInit__thork_native(void) {
    if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&PreparedType) < 0 ||
        PyType_Ready(&GuardType) < 0 || PyType_Ready(&GuardedCallType) < 0 ||
        PyType_Ready(&BinderType) < 0 || PyType_Ready(&OutMakerType) < 0 ||
        PyType_Ready(&FinalizerType) < 0 ||
        PyType_Ready(&LaunchCallType) < 0 || PyType_Ready(&SubscriptType) < 0 ||
        PyType_Ready(&GraphLaunchType) < 0)
        return NULL;
    s_cai = PyUnicode_InternFromString("__cuda_array_interface__");
    s_typestr = PyUnicode_InternFromString("typestr");
    s_strides = PyUnicode_InternFromString("strides");
    s_data = PyUnicode_InternFromString("data");
    s_mask = PyUnicode_InternFromString("mask");
    s_kind_cai = PyUnicode_InternFromString("cai"); /* thork_core._probe.CAI */
    if (!s_cai || !s_typestr || !s_strides || !s_data || !s_mask || !s_kind_cai) return NULL;
    s_kind_dlpack = PyUnicode_InternFromString("dlpack"); /* thork_core._probe.DLPACK */
    s_dlpack = PyUnicode_InternFromString("__dlpack__");
    s_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    s_max_version = Py_BuildValue("(ii)", 1, 0);
#if PY_VERSION_HEX >= 0x030C0000
    if (kinds_watcher < 0) {
        kinds_watcher = PyDict_AddWatcher(kinds_changed);
        if (kinds_watcher < 0) PyErr_Clear(); /* none free: Guards look kinds up per call */
    }
#endif
    s_dl_cuda = PyLong_FromLong(2);
    s_dl_managed = PyLong_FromLong(13);
    if (!s_dl_cuda || !s_dl_managed) return NULL;
    if (!s_kind_dlpack || !s_dlpack || !s_dlpack_device || !s_max_version) return NULL;
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_device = PyUnicode_InternFromString("device");
    s_ptr = PyUnicode_InternFromString("ptr");
    s_stream = PyUnicode_InternFromString("stream");
    s_out = PyUnicode_InternFromString("out");
    s_miss = PyUnicode_InternFromString("_miss");
    s_getitem = PyUnicode_InternFromString("__getitem__");
    if (!s_getitem) return NULL;
    if (!s_shape || !s_dtype || !s_device || !s_ptr || !s_stream || !s_out || !s_miss)
        return NULL;
    s_str = PyUnicode_InternFromString("str");
    s_zero = PyLong_FromLong(0);
    if (!s_zero) return NULL;
    s_c_contig = PyUnicode_InternFromString("_c_contiguous");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_is_contig = PyUnicode_InternFromString("is_contiguous");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_dim = PyUnicode_InternFromString("dim");
    s_ndim = PyUnicode_InternFromString("ndim");
    if (!s_str || !s_c_contig || !s_data_ptr || !s_is_contig || !s_is_cuda || !s_dim ||
        !s_ndim)
        return NULL;
    s_stream_names = PyTuple_Pack(1, s_stream);
    if (!s_stream_names) return NULL;
    /* keyword names interned (session 12): CPython matches a call's keyword names with a
     * function's parameters by identity first and compares the strings only when that
     * fails, ~1700 instructions per __dlpack__ call through a Python wrapper */
    PyObject *s_max_version_name = PyUnicode_InternFromString("max_version");
    if (!s_max_version_name) return NULL;
    s_dlpack_kw = PyTuple_Pack(2, s_stream, s_max_version_name);
    Py_DECREF(s_max_version_name);
    if (!s_dlpack_kw) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) return NULL;
    Py_INCREF(&PreparedType);
    if (PyModule_AddObject(m, "Prepared", (PyObject *)&PreparedType) < 0) return NULL;
    Py_INCREF(&OutMakerType);
    if (PyModule_AddObject(m, "OutMaker", (PyObject *)&OutMakerType) < 0) return NULL;
    Py_INCREF(&BinderType);
    if (PyModule_AddObject(m, "Binder", (PyObject *)&BinderType) < 0) return NULL;
    Py_INCREF(&FinalizerType);
    if (PyModule_AddObject(m, "Finalizer", (PyObject *)&FinalizerType) < 0) return NULL;
    Py_INCREF(&GuardType);
    if (PyModule_AddObject(m, "Guard", (PyObject *)&GuardType) < 0) return NULL;
    Py_INCREF(&GuardedCallType);
    if (PyModule_AddObject(m, "GuardedCall", (PyObject *)&GuardedCallType) < 0) return NULL;
    Py_INCREF(&LaunchCallType);
    if (PyModule_AddObject(m, "LaunchCall", (PyObject *)&LaunchCallType) < 0) return NULL;
    Py_INCREF(&SubscriptType);
    if (PyModule_AddObject(m, "Subscript", (PyObject *)&SubscriptType) < 0) return NULL;
    Py_INCREF(&GraphLaunchType);
    if (PyModule_AddObject(m, "GraphLaunch", (PyObject *)&GraphLaunchType) < 0) return NULL;
    return m;
}
