// _thork_torch_reader: torch tensors read in C++ for Thork's native launcher (session 19).
//
// Built by thork_torch/_reader.py against the installed torch (its headers and libraries,
// its C++ ABI) through thork_core.build.host_extension, and registered as torch.Tensor's
// array reader (thork_array_reader.h): the launcher then reads a tensor's C++ object
// (device, dtype, contiguity, shape, data pointer) and torch's current stream without a
// Python call; read through torch's Python API the same reads cost more than the launch
// itself (docs/benchmarks.md, "Session 19").
//
// Module attributes:
//   reader                  the capsule (THORK_ARRAY_READER_CAPSULE) of the C reader
//   read(obj)               what the reader tells of obj, as a tuple (ptr, shape, dtype,
//                           device_type, device_id, contiguous), or None: for tests
//   current_stream(device)  the raw handle the reader answers for a CUDA device, or None
//   cuda                    whether it was built with torch's CUDA part
//
// Nothing here runs Python code, releases the GIL or lets a C++ exception out: anything
// unusual answers 0 (the launcher's Python path then reads the tensor and says why).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#ifdef THORK_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdint>

#include "thork_array_reader.h"

namespace {

int read(void *o, ThorkArrayInfo *info) noexcept {
    PyObject *obj = static_cast<PyObject *>(o);
    // The launcher asks only for objects of exactly the registered type (torch.Tensor);
    // torch's own exact check (which also admits nn.Parameter) keeps any other object
    // from being unpacked.
    if (!THPVariable_CheckExact(obj)) return 0;
    try {
        const at::Tensor &t = THPVariable_Unpack(obj);
        if (!t.defined() || t.layout() != c10::kStrided) return 0;
        // a lazily conjugated or negated view's memory does not hold its values
        if (t.is_conj() || t.is_neg()) return 0;
        const c10::Device dev = t.device();
        if (dev.is_cuda()) {
            info->device_type = 2;
            info->device_id = dev.has_index() ? dev.index() : 0;
        } else if (dev.is_cpu()) {
            info->device_type = 1;
            info->device_id = 0;
        } else {
            return 0;
        }
        info->dtype = torch::getTHPDtype(t.scalar_type());
        info->ndim = static_cast<int32_t>(t.dim());
        info->shape = t.sizes().data();
        info->contiguous = t.is_contiguous() ? 1 : 0;
        info->ptr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
        return 1;
    } catch (...) {
        return 0;
    }
}

int current_stream(int32_t device, uint64_t *handle) noexcept {
#ifdef THORK_TORCH_CUDA
    try {
        cudaStream_t s =
            c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
        *handle = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s));
        return 1;
    } catch (...) {
        return 0;
    }
#else
    (void)device;
    (void)handle;
    return 0;
#endif
}

const ThorkArrayReader the_reader = {THORK_ARRAY_READER_ABI, sizeof(ThorkArrayReader), read,
                                     current_stream};

PyObject *py_read(PyObject *, PyObject *obj) {
    ThorkArrayInfo info{};
    if (!read(obj, &info)) Py_RETURN_NONE;
    PyObject *shape = PyTuple_New(info.ndim);
    if (!shape) return nullptr;
    for (int32_t d = 0; d < info.ndim; d++) {
        PyObject *e = PyLong_FromLongLong(info.shape[d]);
        if (!e) {
            Py_DECREF(shape);
            return nullptr;
        }
        PyTuple_SET_ITEM(shape, d, e);
    }
    return Py_BuildValue("(KNOiii)", static_cast<unsigned long long>(info.ptr), shape,
                         static_cast<PyObject *>(info.dtype), info.device_type,
                         info.device_id, info.contiguous);
}

PyObject *py_current_stream(PyObject *, PyObject *arg) {
    long device = PyLong_AsLong(arg);
    if (device == -1 && PyErr_Occurred()) return nullptr;
    uint64_t handle = 0;
    if (device < 0 || device > INT32_MAX ||
        !current_stream(static_cast<int32_t>(device), &handle))
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(handle);
}

PyMethodDef methods[] = {
    {"read", py_read, METH_O, "read(obj): (ptr, shape, dtype, device_type, device_id, "
                              "contiguous) as the C reader sees obj, or None"},
    {"current_stream", py_current_stream, METH_O,
     "current_stream(device): the raw handle of torch's current stream there, or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_thork_torch_reader",
                      "torch tensors read in C++ for Thork's native launcher", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__thork_torch_reader(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return nullptr;
    PyObject *cap = PyCapsule_New(const_cast<ThorkArrayReader *>(&the_reader),
                                  THORK_ARRAY_READER_CAPSULE, nullptr);
#ifdef THORK_TORCH_CUDA
    PyObject *cuda = Py_True;
#else
    PyObject *cuda = Py_False;
#endif
    // (AddObjectRef takes its own reference: cap is released here either way)
    int bad = !cap || PyModule_AddObjectRef(m, "reader", cap) < 0 ||
              PyModule_AddObjectRef(m, "cuda", cuda) < 0;
    Py_XDECREF(cap);
    if (bad) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
