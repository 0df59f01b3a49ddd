/*
 * thork_array_reader.h: the C interface through which a plugin reads its library's arrays
 * on Thork's native hot path (kernel[grid, block](...), prepared launches, fkl pipes).
 *
 * Thork's native launcher reads a registered array type through Python attributes by
 * default (a follower adapter's ArrayAdapter.native_reader(tx) -> (2, current, dtypes),
 * where `current(device)` answers the library's current stream). A plugin that can read
 * its arrays in C (torch: the tensor's C++ object and c10's current stream, see
 * thork_torch/_reader.cpp) registers instead a capsule named THORK_ARRAY_READER_CAPSULE
 * whose pointer is a ThorkArrayReader:
 *
 *     native_reader(tx) -> (2, capsule, dtypes)
 *
 * and the launcher calls `read` once per argument of that exact type and `current_stream`
 * once per call. docs/plugins.md ("A native array reader") has the contract in prose;
 * thork_core.launch.ARRAY_READER_CAPSULE and array_reader_include() give the name and
 * this file's folder to a build.
 *
 * Both functions are called with the GIL held, for objects of exactly the registered
 * type. They must not run Python code, must not release the GIL, must not raise (no
 * exception may be left set) and must not throw C++ exceptions across the boundary: they
 * answer 0 for anything they cannot read, and the launcher then takes its Python path,
 * which reads the array again and names what is wrong.
 */
#ifndef THORK_ARRAY_READER_H
#define THORK_ARRAY_READER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define THORK_ARRAY_READER_CAPSULE "thork.array_reader"
#define THORK_ARRAY_READER_ABI 1

/* What `read` tells of one array. Pointers stay valid while the object is unchanged and
 * the GIL is held (the launcher uses them before it runs any Python code). */
typedef struct {
    uint64_t ptr;           /* address of the first element (storage offset included) */
    const int64_t *shape;   /* ndim extents (may be NULL when ndim is 0) */
    void *dtype;            /* a PyObject*, borrowed: the library's dtype object, mapped to
                               a Thork DType through the registration's dtypes dict */
    int32_t ndim;
    int32_t device_type;    /* DLPack's codes: 1 CPU, 2 CUDA, 13 CUDA managed */
    int32_t device_id;      /* the device ordinal (0 for CPU memory) */
    int32_t contiguous;     /* 1: compact row-major (C-contiguous), else 0 */
} ThorkArrayInfo;

typedef struct {
    uint32_t abi;   /* THORK_ARRAY_READER_ABI */
    uint32_t size;  /* sizeof(ThorkArrayReader) */
    /* 1: *info filled for `obj` (a PyObject* of the registered type); 0: not readable
     * here (the launcher's Python path decides). */
    int (*read)(void *obj, ThorkArrayInfo *info);
    /* 1: *handle is the raw handle of the library's current stream on CUDA device
     * `device_id` (what a launch given no stream runs on); 0: unreadable. */
    int (*current_stream)(int32_t device_id, uint64_t *handle);
} ThorkArrayReader;

#ifdef __cplusplus
}
#endif

#endif /* THORK_ARRAY_READER_H */
