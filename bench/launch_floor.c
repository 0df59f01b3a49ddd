/*
 * launch_floor.c - host-side cost of cuLaunchKernel for a trivial kernel.
 *
 * This is the "floor" a Python launcher is compared against: the cheapest
 * a launch can be when issued straight from C through the driver API.
 *
 * Build:  cc -O2 -o launch_floor bench/launch_floor.c -ldl
 * Usage:  launch_floor IMAGE KERNEL [N=1024] [ROUNDS=20] [K=10000] [STREAM=legacy]
 *
 *   IMAGE   path to a cubin or PTX file (loaded with cuModuleLoadData)
 *   KERNEL  name of a kernel with signature
 *           (float *out, const float *a, const float *b)
 *   N       floats per buffer; must be a positive multiple of 128, because
 *           the launch is grid N/128 x block 128 and the kernel is expected
 *           to have no bounds check
 *   ROUNDS  number of timed rounds of K launches each
 *   K       launches per round (default 10000; a few hundred stay below the
 *           driver's launch queue depth, so the enqueue figure is host cost alone)
 *   STREAM  legacy (the NULL stream) or created (a cuStreamCreate'd non-blocking
 *           stream: no implicit ordering with other streams)
 *
 * Output (stdout, one key=value per line, per-launch microseconds, median
 * over rounds):
 *   launch_floor_us_enqueue=<float>    launches only (enqueue cost)
 *   launch_floor_us_with_sync=<float>  launches + the final cuCtxSynchronize
 *
 * libcuda.so.1 is opened with dlopen and the prototypes below are declared
 * here, so neither CUDA headers nor a CUDA toolkit are needed to build this.
 *
 * Exit codes: 0 ok, 1 a CUDA call failed, 2 libcuda.so.1 or one of its
 * symbols could not be loaded, 3 bad arguments or unreadable IMAGE.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Minimal driver API declarations (ABI-compatible with cuda.h). ---- */

typedef int CUresult;                     /* enum cudaError_enum; 0 == CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;   /* 64-bit on all supported hosts */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0

typedef CUresult (*PFN_cuInit)(unsigned int flags);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *dev, int ordinal);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease)(CUdevice dev);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxSynchronize)(void);
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule *mod, const void *image);
typedef CUresult (*PFN_cuModuleUnload)(CUmodule mod);
typedef CUresult (*PFN_cuModuleGetFunction)(CUfunction *fn, CUmodule mod,
                                            const char *name);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction f,
                                       unsigned int gx, unsigned int gy,
                                       unsigned int gz,
                                       unsigned int bx, unsigned int by,
                                       unsigned int bz,
                                       unsigned int shared_bytes,
                                       CUstream stream, void **params,
                                       void **extra);
typedef CUresult (*PFN_cuStreamCreate)(CUstream *stream, unsigned int flags);
typedef CUresult (*PFN_cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);
typedef CUresult (*PFN_cuMemFree)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemsetD32)(CUdeviceptr dptr, unsigned int value,
                                    size_t count);
typedef CUresult (*PFN_cuGetErrorName)(CUresult err, const char **str);
typedef CUresult (*PFN_cuGetErrorString)(CUresult err, const char **str);

static struct {
    PFN_cuInit Init;
    PFN_cuDeviceGet DeviceGet;
    PFN_cuDevicePrimaryCtxRetain DevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease DevicePrimaryCtxRelease;
    PFN_cuCtxSetCurrent CtxSetCurrent;
    PFN_cuCtxSynchronize CtxSynchronize;
    PFN_cuModuleLoadData ModuleLoadData;
    PFN_cuModuleUnload ModuleUnload;
    PFN_cuModuleGetFunction ModuleGetFunction;
    PFN_cuLaunchKernel LaunchKernel;
    PFN_cuStreamCreate StreamCreate;
    PFN_cuMemAlloc MemAlloc;
    PFN_cuMemFree MemFree;
    PFN_cuMemsetD32 MemsetD32;
    PFN_cuGetErrorName GetErrorName;
    PFN_cuGetErrorString GetErrorString;
} cu;

#define EXIT_CUDA 1
#define EXIT_NO_DRIVER 2
#define EXIT_USAGE 3

/*
 * Launches per timed round, and untimed warm-up launches. K can be
 * overridden at build time (-DLAUNCHES_PER_ROUND=256) to stay below the
 * driver's launch queue depth; see the note at the timing loop.
 */
#ifndef LAUNCHES_PER_ROUND
#define LAUNCHES_PER_ROUND 10000
#endif
#define WARMUP_LAUNCHES 1000
#define BLOCK 128u

/* ---- Error handling. ---- */

static void die_cuda(CUresult rc, const char *call, const char *file, int line)
{
    const char *name = NULL;
    const char *desc = NULL;
    /* Both lookups are best effort: they fail on unknown codes. */
    if (cu.GetErrorName == NULL || cu.GetErrorName(rc, &name) != CUDA_SUCCESS)
        name = "CUDA_ERROR_UNKNOWN_CODE";
    if (cu.GetErrorString == NULL ||
        cu.GetErrorString(rc, &desc) != CUDA_SUCCESS)
        desc = "no description";
    fprintf(stderr, "launch_floor: %s failed at %s:%d: %s (%d): %s\n",
            call, file, line, name, (int)rc, desc);
    exit(EXIT_CUDA);
}

#define CHECK(call)                                                        \
    do {                                                                   \
        CUresult rc_ = (call);                                             \
        if (rc_ != CUDA_SUCCESS)                                           \
            die_cuda(rc_, #call, __FILE__, __LINE__);                      \
    } while (0)

/* ---- Driver loading. ---- */

/*
 * Resolve a driver entry point. Where the driver exports a versioned
 * symbol (e.g. cuMemAlloc_v2) it must be preferred: the unversioned
 * export is the legacy ABI (32-bit sizes/pointers for cuMemAlloc), which
 * is what cuda.h's #defines steer normal builds away from.
 */
static void *load_sym(void *lib, const char *versioned, const char *plain)
{
    void *p = NULL;
    if (versioned != NULL)
        p = dlsym(lib, versioned);
    if (p == NULL && plain != NULL)
        p = dlsym(lib, plain);
    if (p == NULL) {
        fprintf(stderr, "launch_floor: libcuda.so.1 lacks symbol %s\n",
                versioned != NULL ? versioned : plain);
        exit(EXIT_NO_DRIVER);
    }
    return p;
}

/* Object pointer -> function pointer; POSIX guarantees this works for dlsym. */
#define LOAD(field, versioned, plain)                                      \
    do {                                                                   \
        void *sym_ = load_sym(lib, versioned, plain);                      \
        memcpy(&cu.field, &sym_, sizeof sym_);                             \
    } while (0)

static void load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        fprintf(stderr,
                "launch_floor: could not load libcuda.so.1 (is an NVIDIA "
                "driver installed?): %s\n",
                why != NULL ? why : "unknown dlopen error");
        exit(EXIT_NO_DRIVER);
    }
    /* Error helpers first, so later failures can be reported by name. */
    LOAD(GetErrorName, NULL, "cuGetErrorName");
    LOAD(GetErrorString, NULL, "cuGetErrorString");
    LOAD(Init, NULL, "cuInit");
    LOAD(DeviceGet, NULL, "cuDeviceGet");
    LOAD(DevicePrimaryCtxRetain, NULL, "cuDevicePrimaryCtxRetain");
    LOAD(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",
         "cuDevicePrimaryCtxRelease");
    LOAD(CtxSetCurrent, NULL, "cuCtxSetCurrent");
    LOAD(CtxSynchronize, NULL, "cuCtxSynchronize");
    LOAD(ModuleLoadData, NULL, "cuModuleLoadData");
    LOAD(ModuleUnload, NULL, "cuModuleUnload");
    LOAD(ModuleGetFunction, NULL, "cuModuleGetFunction");
    LOAD(LaunchKernel, NULL, "cuLaunchKernel");
    LOAD(StreamCreate, NULL, "cuStreamCreate");
    LOAD(MemAlloc, "cuMemAlloc_v2", NULL);
    LOAD(MemFree, "cuMemFree_v2", NULL);
    LOAD(MemsetD32, "cuMemsetD32_v2", NULL);
    /* The library stays loaded for the life of the process. */
}

/* ---- Helpers. ---- */

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s IMAGE KERNEL [N=1024] [ROUNDS=20] [K=%d] [STREAM=legacy]\n"
            "  IMAGE   cubin or PTX file\n"
            "  KERNEL  kernel taking (float *out, const float *a, "
            "const float *b)\n"
            "  N       floats per buffer, positive multiple of %u\n"
            "  ROUNDS  timed rounds of K launches\n"
            "  K       launches per round\n"
            "  STREAM  legacy or created (a non-blocking stream)\n",
            argv0, LAUNCHES_PER_ROUND, BLOCK);
    exit(EXIT_USAGE);
}

static long parse_positive(const char *s, const char *what)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0) {
        fprintf(stderr, "launch_floor: %s must be a positive integer, got '%s'\n",
                what, s);
        exit(EXIT_USAGE);
    }
    return v;
}

/*
 * Read a whole file and NUL-terminate it: cuModuleLoadData takes no size,
 * so a PTX image must be a C string (a cubin is self-describing ELF and
 * ignores the extra byte).
 */
static void *read_image(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "launch_floor: cannot open %s: %s\n", path,
                strerror(errno));
        exit(EXIT_USAGE);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL) {
            fprintf(stderr, "launch_floor: out of memory reading %s\n", path);
            exit(EXIT_USAGE);
        }
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    if (ferror(f)) {
        fprintf(stderr, "launch_floor: error reading %s\n", path);
        exit(EXIT_USAGE);
    }
    fclose(f);
    if (len == 0) {
        fprintf(stderr, "launch_floor: %s is empty\n", path);
        exit(EXIT_USAGE);
    }
    buf[len] = '\0';
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- Main. ---- */

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 7)
        usage(argv[0]);
    const char *image_path = argv[1];
    const char *kernel_name = argv[2];
    long n = argc > 3 ? parse_positive(argv[3], "N") : 1024;
    long rounds = argc > 4 ? parse_positive(argv[4], "ROUNDS") : 20;
    long k = argc > 5 ? parse_positive(argv[5], "K") : LAUNCHES_PER_ROUND;
    const char *stream_kind = argc > 6 ? argv[6] : "legacy";
    if (strcmp(stream_kind, "legacy") != 0 && strcmp(stream_kind, "created") != 0) {
        fprintf(stderr, "launch_floor: STREAM must be legacy or created, got %s\n",
                stream_kind);
        return EXIT_USAGE;
    }
    if (n % BLOCK != 0) {
        fprintf(stderr, "launch_floor: N must be a multiple of %u, got %ld\n",
                BLOCK, n);
        return EXIT_USAGE;
    }
    void *image = read_image(image_path);

    load_driver();

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CHECK(cu.Init(0));
    CHECK(cu.DeviceGet(&dev, 0));
    CHECK(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu.CtxSetCurrent(ctx));
    CHECK(cu.ModuleLoadData(&mod, image));
    free(image);
    CHECK(cu.ModuleGetFunction(&fn, mod, kernel_name));

    CUdeviceptr out, a, b;
    size_t bytes = (size_t)n * sizeof(float);
    CHECK(cu.MemAlloc(&out, bytes));
    CHECK(cu.MemAlloc(&a, bytes));
    CHECK(cu.MemAlloc(&b, bytes));
    /* Zero inputs so the kernel never reads uninitialised memory. */
    CHECK(cu.MemsetD32(a, 0, (size_t)n));
    CHECK(cu.MemsetD32(b, 0, (size_t)n));

    /* cuLaunchKernel takes an array of pointers to each argument value. */
    void *params[3] = {&out, &a, &b};
    unsigned int grid = (unsigned int)(n / BLOCK);
    CUstream stream = NULL; /* legacy default stream */
    if (strcmp(stream_kind, "created") == 0)
        CHECK(cu.StreamCreate(&stream, 1u)); /* CU_STREAM_NON_BLOCKING */

    /* Warm-up: first launches pay lazy module/function setup costs. */
    for (int i = 0; i < WARMUP_LAUNCHES; i++)
        CHECK(cu.LaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, stream,
                              params, NULL));
    CHECK(cu.CtxSynchronize());

    double *enq = malloc((size_t)rounds * sizeof *enq);
    double *with_sync = malloc((size_t)rounds * sizeof *with_sync);
    if (enq == NULL || with_sync == NULL) {
        fprintf(stderr, "launch_floor: out of memory\n");
        return EXIT_USAGE;
    }

    /*
     * Each round times the same K launches twice over: t1 - t0 is the pure
     * enqueue cost, t2 - t0 adds draining the queue. Note that K exceeds
     * the driver's launch queue depth, so if the GPU executes launches
     * slower than the host issues them, cuLaunchKernel eventually blocks
     * and the enqueue figure converges on GPU-side throughput.
     */
    for (long r = 0; r < rounds; r++) {
        double t0 = now_s();
        for (long i = 0; i < k; i++)
            CHECK(cu.LaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, stream,
                                  params, NULL));
        double t1 = now_s();
        CHECK(cu.CtxSynchronize());
        double t2 = now_s();
        enq[r] = (t1 - t0) * 1e6 / (double)k;
        with_sync[r] = (t2 - t0) * 1e6 / (double)k;
    }

    printf("launch_floor_us_enqueue=%.6f\n", median(enq, (size_t)rounds));
    printf("launch_floor_us_with_sync=%.6f\n",
           median(with_sync, (size_t)rounds));
    fflush(stdout);

    free(enq);
    free(with_sync);
    CHECK(cu.MemFree(out));
    CHECK(cu.MemFree(a));
    CHECK(cu.MemFree(b));
    CHECK(cu.ModuleUnload(mod));
    CHECK(cu.DevicePrimaryCtxRelease(dev));
    return 0;
}
