/* CuPy's ndarray and MemoryPointer as the native readers see them, for
 * tests/core/test_foreign_readers.py (built there with the C compiler; session 16):
 * C types whose `data` and `ptr` are read-only in C, as CuPy's Cython `readonly` fields.
 *   Mem(ptr): .ptr, read-only, counted in Mem.reads() (a C getter with no setter)
 *   Array(mem, dtype, shape): ._c_contiguous, .dtype, .data (read-only), .shape, .ndim
 *     (the rest writable, as CuPy's shape setter changes shape and ndim); weak references;
 *     .reinit(mem, dtype) stands for re-running a live array's __init__.
 *   FixedArray: the same without weak references. */
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t ptr;
} MemObject;

static Py_ssize_t reads;

static int mem_init(MemObject *self, PyObject *args, PyObject *kw) {
    (void)kw;
    return PyArg_ParseTuple(args, "n", &self->ptr) ? 0 : -1;
}

static PyObject *mem_ptr(MemObject *self, void *closure) {
    (void)closure;
    reads++;
    return PyLong_FromSsize_t(self->ptr);
}

static PyObject *mem_reads(PyObject *cls, PyObject *unused) {
    (void)cls;
    (void)unused;
    return PyLong_FromSsize_t(reads);
}

static PyGetSetDef mem_getset[] = {{"ptr", (getter)mem_ptr, NULL, NULL, NULL}, {NULL}};
static PyMethodDef mem_methods[] = {
    {"reads", mem_reads, METH_NOARGS | METH_CLASS, "ptr reads so far"}, {NULL}};

static PyTypeObject MemType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "readonly_arrays.Mem",
    .tp_basicsize = sizeof(MemObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)mem_init,
    .tp_getset = mem_getset,
    .tp_methods = mem_methods,
};

typedef struct {
    PyObject_HEAD
    PyObject *contig, *dtype, *data, *shape, *ndim, *weak;
} ArrayObject;

static int array_set(ArrayObject *self, PyObject *mem, PyObject *dtype, PyObject *shape) {
    Py_XSETREF(self->data, Py_NewRef(mem));
    Py_XSETREF(self->dtype, Py_NewRef(dtype));
    if (shape) {
        Py_ssize_t n = PyObject_Length(shape);
        if (n < 0) return -1;
        Py_XSETREF(self->shape, Py_NewRef(shape));
        Py_XSETREF(self->ndim, PyLong_FromSsize_t(n));
    }
    return 0;
}

static int array_init(ArrayObject *self, PyObject *args, PyObject *kw) {
    PyObject *mem, *dtype, *shape;
    (void)kw;
    if (!PyArg_ParseTuple(args, "OOO", &mem, &dtype, &shape)) return -1;
    Py_XSETREF(self->contig, Py_NewRef(Py_True));
    return array_set(self, mem, dtype, shape);
}

static PyObject *array_reinit(ArrayObject *self, PyObject *args) {
    PyObject *mem, *dtype;
    if (!PyArg_ParseTuple(args, "OO", &mem, &dtype)) return NULL;
    if (array_set(self, mem, dtype, NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

static void array_dealloc(ArrayObject *self) {
    if (self->weak) PyObject_ClearWeakRefs((PyObject *)self);
    Py_XDECREF(self->contig);
    Py_XDECREF(self->dtype);
    Py_XDECREF(self->data);
    Py_XDECREF(self->shape);
    Py_XDECREF(self->ndim);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef array_members[] = {
    {"_c_contiguous", T_OBJECT_EX, offsetof(ArrayObject, contig), 0, NULL},
    {"dtype", T_OBJECT_EX, offsetof(ArrayObject, dtype), READONLY, NULL},
    {"data", T_OBJECT_EX, offsetof(ArrayObject, data), READONLY, NULL},
    {"shape", T_OBJECT_EX, offsetof(ArrayObject, shape), 0, NULL},
    {"ndim", T_OBJECT_EX, offsetof(ArrayObject, ndim), 0, NULL},
    {NULL}};
static PyMethodDef array_methods[] = {
    {"reinit", (PyCFunction)array_reinit, METH_VARARGS, "reinit(mem, dtype)"}, {NULL}};

static PyTypeObject ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "readonly_arrays.Array",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)array_init,
    .tp_dealloc = (destructor)array_dealloc,
    .tp_members = array_members,
    .tp_methods = array_methods,
    .tp_weaklistoffset = offsetof(ArrayObject, weak),
};

static PyTypeObject FixedArrayType; /* ArrayType without weak references (made at init) */

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "readonly_arrays", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_readonly_arrays(void) {
    FixedArrayType = ArrayType;
    FixedArrayType.tp_name = "readonly_arrays.FixedArray";
    FixedArrayType.tp_weaklistoffset = 0;
    if (PyType_Ready(&MemType) < 0 || PyType_Ready(&ArrayType) < 0 ||
        PyType_Ready(&FixedArrayType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyModule_AddObjectRef(m, "Mem", (PyObject *)&MemType);
    PyModule_AddObjectRef(m, "Array", (PyObject *)&ArrayType);
    PyModule_AddObjectRef(m, "FixedArray", (PyObject *)&FixedArrayType);
    return m;
}
