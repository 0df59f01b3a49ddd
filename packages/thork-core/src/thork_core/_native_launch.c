/*
 * _thork_native: the C-level hot path of a prepared launch.
 *
 * Built on first use by thork_core/_native.py with the host C compiler against this
 * Python's headers, and cached; where that cannot be done Thork keeps its ctypes path,
 * which does the same work in Python.
 *
 * Launch(fn, function, grid, block, shared_mem, argv, nparams, slots, on_error)
 *     fn        address of a function with cuLaunchKernel's signature
 *     function  the CUfunction handle (first argument of fn)
 *     grid      (x, y, z) blocks; block (x, y, z) threads
 *     argv      address of the void* array of kernel-parameter addresses (the
 *               ArgumentPack, which the Python side keeps alive); nparams entries
 *     slots     addresses of the 8-byte pointer parameters, in parameter order (each
 *               must be one of argv's entries)
 *     on_error  called with the CUresult when fn returns non-zero (it raises)
 *   .run(pointers, stream=0)   launch with these addresses in the pointer slots, no checks
 *
 * A call never writes the shared argument pack: it launches with a copy of argv on its
 * own stack whose pointer entries point at the call's own addresses. Two threads may
 * call one Launch at once (the GIL is released during the driver call).
 *   .guard(array_type, specs, order, align_mask, to_handle) -> Guard
 *
 * Guard(*arrays, stream) -> bool
 *     True: every array is exactly array_type with the spec's shape, dtype (identity) and
 *     device, was produced on `stream` or the legacy stream (its `.stream` is 0 or the
 *     launch stream), and all addresses are clear of align_mask: the kernel was launched.
 *     False: something differs, nothing was launched, the caller takes its general path.
 *     stream: None (0), an int handle, or anything `to_handle` turns into one.
 *     Slot k of the kernel receives arrays[order[k]].
 *
 * GuardedCall: a base type whose instances' call obj(x, out=y[, stream=s]) tries the Guard
 *     in obj._hot_guard in C and returns y when it launched; else obj._miss(*args, **kw).
 *
 * The GIL is released around fn, as CuPy's launcher does: a launch can block on a full
 * queue, and a stream callback waiting for the GIL must not deadlock against it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h> /* T_OBJECT_EX: the member type of a __slots__ entry */

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, void *stream,
                         void **params, void **extra);

#define MAX_SLOTS 32
#define MAX_PARAMS 1024 /* more: the caller keeps its ctypes path */

static PyObject *s_shape, *s_dtype, *s_device, *s_ptr, *s_stream;

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

typedef struct {
    PyObject_HEAD
    launch_fn fn;
    void *function;
    unsigned grid[3], block[3], shared;
    Py_ssize_t nparams;
    void *params[MAX_PARAMS]; /* argv as prepared: scalar entries are used as they are */
    Py_ssize_t nslots;
    Py_ssize_t slot_index[MAX_SLOTS]; /* the argv entry of each pointer parameter */
    PyObject *on_error;
} LaunchObject;

typedef struct {
    PyObject_HEAD
    LaunchObject *launch;
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
} GuardObject;

static PyTypeObject LaunchType;
static PyTypeObject GuardType;

static int read_dims(PyObject *seq, unsigned out[3], const char *name) {
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

static int launch_init(LaunchObject *self, PyObject *args, PyObject *kw) {
    PyObject *fn, *function, *grid, *block, *argv, *slots, *on_error;
    unsigned int shared;
    Py_ssize_t nparams;
    static char *names[] = {"fn", "function", "grid", "block", "shared_mem", "argv",
                            "nparams", "slots", "on_error", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOIOnOO", names, &fn, &function, &grid,
                                     &block, &shared, &argv, &nparams, &slots, &on_error))
        return -1;
    self->fn = (launch_fn)as_address(fn);
    if (PyErr_Occurred()) return -1;
    if (!self->fn) {
        PyErr_SetString(PyExc_ValueError, "fn: a non-null function address is required");
        return -1;
    }
    self->function = as_address(function);
    void **argv_p = (void **)as_address(argv);
    if (PyErr_Occurred()) return -1;
    if (nparams < 0 || nparams > MAX_PARAMS || (nparams > 0 && !argv_p)) {
        PyErr_Format(PyExc_ValueError, "nparams: 0..%d parameters with a non-null argv, "
                     "got %zd", MAX_PARAMS, nparams);
        return -1;
    }
    self->nparams = nparams;
    for (Py_ssize_t i = 0; i < nparams; i++) self->params[i] = argv_p[i];
    if (read_dims(grid, self->grid, "grid") || read_dims(block, self->block, "block"))
        return -1;
    self->shared = shared;
    PyObject *fast = PySequence_Fast(slots, "slots must be a sequence of addresses");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_SLOTS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "slots: at most %d pointer parameters, got %zd",
                     MAX_SLOTS, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        void *slot = as_address(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        Py_ssize_t j = 0;
        while (j < nparams && self->params[j] != slot) j++;
        if (j == nparams) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "slots: entry %zd is not one of argv's entries", i);
            return -1;
        }
        self->slot_index[i] = j;
    }
    Py_DECREF(fast);
    self->nslots = n;
    if (!PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "on_error must be callable");
        return -1;
    }
    Py_INCREF(on_error);
    Py_XSETREF(self->on_error, on_error);
    return 0;
}

static void launch_dealloc(LaunchObject *self) {
    Py_XDECREF(self->on_error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Launch with vals[k] as pointer parameter k (vals lives on the caller's stack). */
static PyObject *do_launch(LaunchObject *self, uint64_t *vals, void *stream) {
    int err;
    void *params[MAX_PARAMS];
    memcpy(params, self->params, (size_t)self->nparams * sizeof(void *));
    for (Py_ssize_t k = 0; k < self->nslots; k++) params[self->slot_index[k]] = &vals[k];
    Py_BEGIN_ALLOW_THREADS
    err = self->fn(self->function, self->grid[0], self->grid[1], self->grid[2],
                   self->block[0], self->block[1], self->block[2], self->shared, stream,
                   params, NULL);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *r = PyObject_CallFunction(self->on_error, "i", err);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static int ready(LaunchObject *self) {
    if (self->fn) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Launch was not initialized");
    return 0;
}

static PyObject *launch_run(LaunchObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
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
    uint64_t vals[MAX_SLOTS];
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        vals[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    void *stream = NULL;
    if (nargs == 2 && args[1] != Py_None) {
        stream = as_address(args[1]);
        if (PyErr_Occurred()) return NULL;
    }
    return do_launch(self, vals, stream);
}

static PyObject *launch_guard(LaunchObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *guard_call(GuardObject *g, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames);

static PyMethodDef launch_methods[] = {
    {"run", (PyCFunction)(void (*)(void))launch_run, METH_FASTCALL,
     "run(pointers, stream=0): write the addresses into the pointer slots and launch."},
    {"guard", (PyCFunction)(void (*)(void))launch_guard, METH_FASTCALL,
     "guard(array_type, specs, order, align_mask, to_handle) -> Guard"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_thork_native.Launch",
    .tp_basicsize = sizeof(LaunchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A prepared cuLaunchKernel call: fixed function, geometry and argument pack.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launch_init,
    .tp_dealloc = (destructor)launch_dealloc,
    .tp_methods = launch_methods,
};

/* ---- Guard ---------------------------------------------------------------------- */

static PyObject *guard_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    return guard_call((GuardObject *)self, args, nargsf, kwnames);
}

static PyObject *launch_guard(LaunchObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "guard(array_type, specs, order, align_mask, to_handle)");
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
        PyObject *shape, *dtype, *device;
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "OOO", &shape, &dtype, &device)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "specs: each entry is (shape, dtype, device)");
            goto fail;
        }
        Py_INCREF(shape);
        Py_INCREF(dtype);
        g->shapes[i] = shape;
        g->dtypes[i] = dtype;
        g->n = i + 1;
        if (i == 0) {
            Py_INCREF(device);
            g->device = device;
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
    }
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
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *a = args[i], *v;
        int ok;
        if (Py_TYPE(a) != g->array_type) Py_RETURN_FALSE;
        if (!(v = field_get(a, &g->fields[F_SHAPE]))) return NULL;
        ok = same(v, g->shapes[i]);
        Py_DECREF(v);
        if (ok <= 0) goto miss_or_error;
        if (!(v = field_get(a, &g->fields[F_DTYPE]))) return NULL;
        ok = v == g->dtypes[i];
        Py_DECREF(v);
        if (!ok) Py_RETURN_FALSE;
        if (!(v = field_get(a, &g->fields[F_DEVICE]))) return NULL;
        ok = same(v, g->device);
        Py_DECREF(v);
        if (ok <= 0) goto miss_or_error;
        if (!(v = field_get(a, &g->fields[F_STREAM]))) return NULL;
        if (v != Py_None) {
            uint64_t produced = PyLong_AsUnsignedLongLong(v);
            if (PyErr_Occurred()) {
                Py_DECREF(v);
                return NULL;
            }
            if (produced != 0 && produced != handle) {
                Py_DECREF(v);
                Py_RETURN_FALSE;  /* the caller orders the launch after the producer */
            }
        }
        Py_DECREF(v);
        if (!(v = field_get(a, &g->fields[F_PTR]))) return NULL;
        ptrs[i] = PyLong_AsUnsignedLongLong(v);
        Py_DECREF(v);
        if (PyErr_Occurred()) return NULL;
        bits |= ptrs[i];
        continue;
    miss_or_error:
        if (ok < 0) return NULL;
        Py_RETURN_FALSE;
    }
    if (bits & g->mask) Py_RETURN_FALSE;
    LaunchObject *l = g->launch;
    uint64_t vals[MAX_SLOTS];
    for (Py_ssize_t k = 0; k < l->nslots; k++) vals[k] = ptrs[g->order[k]];
    PyObject *r = do_launch(l, vals, (void *)(uintptr_t)handle);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_TRUE;
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

static int is_name(PyObject *key, PyObject *name) {
    return key == name || (PyUnicode_Check(key) && PyUnicode_Compare(key, name) == 0);
}

static PyObject *guarded_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs == 1 && (nkw == 1 || nkw == 2)) {
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
    if (PyTuple_GET_SIZE(args) == 1 && (nkw == 1 || nkw == 2)) {
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
    GuardedCallObject *self = (GuardedCallObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = guarded_vectorcall;
    return (PyObject *)self;
}

static int guarded_traverse(GuardedCallObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->guard);
    return 0;
}

static int guarded_clear(GuardedCallObject *self) {
    Py_CLEAR(self->guard);
    return 0;
}

static void guarded_dealloc(GuardedCallObject *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->guard);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef guarded_members[] = {
    {"_hot_guard", T_OBJECT, offsetof(GuardedCallObject, guard), 0,
     "The Guard tried first by obj(x, out=y[, stream=s]) (None: none yet)."},
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

static PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_thork_native",
    "Thork's C-level prepared launch (see _native_launch.c).", -1, NULL};

PyMODINIT_FUNC PyInit__thork_native(void) {
    if (PyType_Ready(&LaunchType) < 0 || PyType_Ready(&GuardType) < 0 ||
        PyType_Ready(&GuardedCallType) < 0)
        return NULL;
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_device = PyUnicode_InternFromString("device");
    s_ptr = PyUnicode_InternFromString("ptr");
    s_stream = PyUnicode_InternFromString("stream");
    s_out = PyUnicode_InternFromString("out");
    s_miss = PyUnicode_InternFromString("_miss");
    if (!s_shape || !s_dtype || !s_device || !s_ptr || !s_stream || !s_out || !s_miss)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&LaunchType);
    if (PyModule_AddObject(m, "Launch", (PyObject *)&LaunchType) < 0) return NULL;
    Py_INCREF(&GuardType);
    if (PyModule_AddObject(m, "Guard", (PyObject *)&GuardType) < 0) return NULL;
    Py_INCREF(&GuardedCallType);
    if (PyModule_AddObject(m, "GuardedCall", (PyObject *)&GuardedCallType) < 0) return NULL;
    return m;
}
