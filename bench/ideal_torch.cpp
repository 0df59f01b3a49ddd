// ideal_torch.cpp - the least a launcher linked against libtorch does per call with torch
// tensors (session 18): a CPython extension module (ideal_torch) built by bench/_floor.py's
// ideal_libtorch() against the installed torch's headers and libraries, for bench_core's
// interleaved rows. The companion of bench/ideal_launcher.c's tensors(), which reads
// through torch's Python API: this one reads each tensor's C++ object directly, as a
// torch C++ extension would, and asks torch's current stream in C++. A bound, not a
// launcher: one kernel of three pointer parameters (seed 000's matrix_add), float32, one
// device, one stream, set once.
//
//   setup(fn, function, gx, bx, stream, device)
//     fn: cuLaunchKernel's address; function: the CUfunction; grid gx x 1 x 1, block
//     bx x 1 x 1, no dynamic shared memory, on `stream` (a raw handle), tensors on CUDA
//     device `device`.
//
//   tensors(a, b, c): torch's current stream on the device once (it must be `stream`);
//     per tensor: a torch tensor (THPVariable_Check), on the device, float32, contiguous
//     (torch's own flag), its data pointer; then cuLaunchKernel. Nothing is kept between
//     calls (torch keeps no pointer a caller may trust: set_, resize_ and .data = change it).
//
// Raises RuntimeError naming the driver's code when the launch fails, ValueError or
// TypeError when an argument is not what setup described.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>

namespace {

typedef int (*launch_kernel_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shared, void *stream,
                                void **params, void **extra);

launch_kernel_fn launch_fn;
void *function, *stream;
unsigned gx, bx;
c10::DeviceIndex device;

PyObject *setup(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 6) {
        PyErr_Format(PyExc_TypeError, "setup: 6 arguments expected, got %zd", n);
        return nullptr;
    }
    unsigned long long v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return nullptr;
    }
    launch_fn = reinterpret_cast<launch_kernel_fn>(static_cast<uintptr_t>(v[0]));
    function = reinterpret_cast<void *>(static_cast<uintptr_t>(v[1]));
    gx = static_cast<unsigned>(v[2]);
    bx = static_cast<unsigned>(v[3]);
    stream = reinterpret_cast<void *>(static_cast<uintptr_t>(v[4]));
    device = static_cast<c10::DeviceIndex>(v[5]);
    Py_RETURN_NONE;
}

PyObject *tensors(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || !launch_fn) {
        PyErr_SetString(PyExc_TypeError, "tensors(a, b, c) after setup()");
        return nullptr;
    }
    void *current;
    try {
        current = c10::cuda::getCurrentCUDAStream(device).stream();
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
    if (current != stream) {
        PyErr_SetString(PyExc_ValueError,
                        "tensors: torch's current stream is not the launch stream");
        return nullptr;
    }
    uint64_t vals[3];
    for (int i = 0; i < 3; i++) {
        if (!THPVariable_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "tensors: argument %d: a torch tensor expected, got %s",
                         i, Py_TYPE(args[i])->tp_name);
            return nullptr;
        }
        const at::Tensor &t = THPVariable_Unpack(args[i]);
        if (!t.is_cuda() || t.get_device() != device || t.scalar_type() != c10::kFloat ||
            !t.is_contiguous()) {
            PyErr_Format(PyExc_ValueError, "tensors: argument %d: not a contiguous float32 "
                         "tensor on the device of setup", i);
            return nullptr;
        }
        vals[i] = reinterpret_cast<uintptr_t>(t.data_ptr());
    }
    void *params[3] = {&vals[0], &vals[1], &vals[2]};
    int rc = launch_fn(function, gx, 1, 1, bx, 1, 1, 0, stream, params, nullptr);
    if (rc) return PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed: driver code %d", rc);
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(setup)),
     METH_FASTCALL, "see the file's head"},
    {"tensors", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(tensors)),
     METH_FASTCALL, "see the file's head"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "ideal_torch",
                      "the least a libtorch-linked launcher does per call", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_ideal_torch(void) { return PyModule_Create(&module); }
