/*
 * first_load_floor.c - the C floor of issue 11's "cache hit in a fresh process" row.
 *
 * In a fresh process, after the context exists and the arrays are on the device (what
 * bench/first_call.py's children do before their timed call), time what any launcher must
 * do for its first launch of a kernel whose cubin is already on disk: read the file,
 * cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel (enqueue, as the Python row times).
 * A second module is then loaded from the same bytes and launched, to separate the
 * context's one-time cost of its first module from the per-module cost.
 *
 * Build:  cc -O2 -o first_load_floor bench/first_load_floor.c -ldl
 * Usage:  first_load_floor CUBIN KERNEL        (kernel: (float*, const float*, const float*),
 *                                               launched as grid 8 x block 128)
 * Output: key=value lines in microseconds: read_us, load_us, function_us, launch_us,
 *         first_total_us (the four together), second_total_us (load+function+launch of a
 *         second module), and ok=1 when both launches wrote a + b.
 * Exit codes: 0 ok, 1 a CUDA call failed or wrong values, 2 no driver, 3 bad arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

static CUresult (*Init)(unsigned int);
static CUresult (*DeviceGet)(CUdevice *, int);
static CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*CtxSetCurrent)(CUcontext);
static CUresult (*CtxSynchronize)(void);
static CUresult (*ModuleLoadData)(CUmodule *, const void *);
static CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, CUstream, void **, void **);
static CUresult (*MemAlloc)(CUdeviceptr *, size_t);
static CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);

#define N 1024
#define CHECK(call) do { CUresult rc_ = (call); if (rc_) { \
    fprintf(stderr, "first_load_floor: %s failed: %d\n", #call, rc_); exit(1); } } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "first_load_floor: no %s in libcuda\n", name); exit(2); }
    return p;
}

static int check(CUdeviceptr out, const float *a, const float *b)
{
    static float got[N];
    CHECK(MemcpyDtoH(got, out, sizeof got));
    for (int i = 0; i < N; i++)
        if (got[i] != a[i] + b[i]) return 0;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: first_load_floor CUBIN KERNEL\n"); return 3; }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "first_load_floor: %s\n", dlerror()); return 2; }
    *(void **)&Init = sym(lib, "cuInit");
    *(void **)&DeviceGet = sym(lib, "cuDeviceGet");
    *(void **)&PrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&CtxSetCurrent = sym(lib, "cuCtxSetCurrent");
    *(void **)&CtxSynchronize = sym(lib, "cuCtxSynchronize");
    *(void **)&ModuleLoadData = sym(lib, "cuModuleLoadData");
    *(void **)&ModuleGetFunction = sym(lib, "cuModuleGetFunction");
    *(void **)&LaunchKernel = sym(lib, "cuLaunchKernel");
    *(void **)&MemAlloc = sym(lib, "cuMemAlloc_v2");
    *(void **)&MemcpyHtoD = sym(lib, "cuMemcpyHtoD_v2");
    *(void **)&MemcpyDtoH = sym(lib, "cuMemcpyDtoH_v2");

    /* Untimed: what the Python child does before its timed call. */
    CUdevice dev; CUcontext ctx;
    CHECK(Init(0)); CHECK(DeviceGet(&dev, 0));
    CHECK(PrimaryCtxRetain(&ctx, dev)); CHECK(CtxSetCurrent(ctx));
    static float a[N], b[N], zero[N];
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 1.0f; }
    CUdeviceptr d_out, d_a, d_b;
    CHECK(MemAlloc(&d_out, sizeof a)); CHECK(MemAlloc(&d_a, sizeof a));
    CHECK(MemAlloc(&d_b, sizeof a));
    CHECK(MemcpyHtoD(d_out, zero, sizeof a)); CHECK(MemcpyHtoD(d_a, a, sizeof a));
    CHECK(MemcpyHtoD(d_b, b, sizeof a));
    void *params[] = {&d_out, &d_a, &d_b};

    double t0 = now_us();
    FILE *f = fopen(argv[1], "rb");
    if (!f) { fprintf(stderr, "first_load_floor: cannot open %s\n", argv[1]); return 3; }
    fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);
    char *image = malloc((size_t)size);
    if (!image || fread(image, 1, (size_t)size, f) != (size_t)size) return 3;
    fclose(f);
    double t1 = now_us();
    CUmodule mod; CUfunction fn;
    CHECK(ModuleLoadData(&mod, image));
    double t2 = now_us();
    CHECK(ModuleGetFunction(&fn, mod, argv[2]));
    double t3 = now_us();
    CHECK(LaunchKernel(fn, N / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    double t4 = now_us();
    CHECK(CtxSynchronize());
    int ok = check(d_out, a, b);
    CHECK(MemcpyHtoD(d_out, zero, sizeof a));

    double u0 = now_us();
    CUmodule mod2; CUfunction fn2;
    CHECK(ModuleLoadData(&mod2, image));
    CHECK(ModuleGetFunction(&fn2, mod2, argv[2]));
    CHECK(LaunchKernel(fn2, N / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    double u1 = now_us();
    CHECK(CtxSynchronize());
    ok = ok && check(d_out, a, b);

    printf("read_us=%.1f\nload_us=%.1f\nfunction_us=%.1f\nlaunch_us=%.1f\n"
           "first_total_us=%.1f\nsecond_total_us=%.1f\nok=%d\n",
           t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, u1 - u0, ok);
    return ok ? 0 : 1;
}
