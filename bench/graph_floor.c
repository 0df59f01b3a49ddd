/*
 * graph_floor.c - host-side cost of cuGraphLaunch for a graph of NODES launches of a
 * trivial kernel: the floor Thork's Graph.replay is compared against.
 *
 * Build:  cc -O2 -o graph_floor bench/graph_floor.c -ldl
 * Usage:  graph_floor IMAGE KERNEL NODES [ROUNDS=201] [K=200]
 *
 *   IMAGE   cubin or PTX (cuModuleLoadData); KERNEL takes (float*, const float*,
 *           const float*) and is launched with grid 8 x block 128 (1024 floats)
 *   NODES   kernel launches captured (stream capture on a non-blocking stream)
 *   ROUNDS  timed rounds; K back-to-back cuGraphLaunch per round (a burst: 200 stays
 *           below the launch queue depth, so the figure is host cost alone)
 *
 * Output: graph_floor_us_enqueue=<median us per cuGraphLaunch>
 * libcuda.so.1 is opened with dlopen; no CUDA headers needed.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUgraph, *CUgraphExec;

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamBeginCapture)(CUstream, int);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
} cu;

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult rc_ = (call);                                                   \
        if (rc_ != 0) {                                                          \
            fprintf(stderr, "graph_floor: %s failed (%d)\n", #call, (int)rc_);   \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = a ? dlsym(lib, a) : NULL;
    if (!p && b) p = dlsym(lib, b);
    if (!p) { fprintf(stderr, "graph_floor: libcuda lacks %s\n", a ? a : b); exit(2); }
    return p;
}
#define LOAD(f, a, b) do { void *s_ = sym(lib, a, b); memcpy(&cu.f, &s_, sizeof s_); } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s IMAGE KERNEL NODES [ROUNDS=201] [K=200]\n", argv[0]);
        return 3;
    }
    long nodes = atol(argv[3]);
    long rounds = argc > 4 ? atol(argv[4]) : 201;
    long k = argc > 5 ? atol(argv[5]) : 200;
    if (nodes < 1 || rounds < 1 || k < 1) { fprintf(stderr, "graph_floor: bad counts\n"); return 3; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { fprintf(stderr, "graph_floor: cannot open %s\n", argv[1]); return 3; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *image = calloc((size_t)size + 1, 1);
    if (!image || fread(image, 1, (size_t)size, f) != (size_t)size) return 3;
    fclose(f);

    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "graph_floor: no libcuda.so.1\n"); return 2; }
    LOAD(Init, NULL, "cuInit");
    LOAD(DeviceGet, NULL, "cuDeviceGet");
    LOAD(PrimaryCtxRetain, NULL, "cuDevicePrimaryCtxRetain");
    LOAD(CtxSetCurrent, NULL, "cuCtxSetCurrent");
    LOAD(CtxSynchronize, NULL, "cuCtxSynchronize");
    LOAD(ModuleLoadData, NULL, "cuModuleLoadData");
    LOAD(ModuleGetFunction, NULL, "cuModuleGetFunction");
    LOAD(LaunchKernel, NULL, "cuLaunchKernel");
    LOAD(StreamCreate, NULL, "cuStreamCreate");
    LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture");
    LOAD(StreamEndCapture, NULL, "cuStreamEndCapture");
    LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags", NULL);
    LOAD(GraphLaunch, NULL, "cuGraphLaunch");
    LOAD(MemAlloc, "cuMemAlloc_v2", NULL);
    LOAD(MemsetD32, "cuMemsetD32_v2", NULL);

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream stream;
    CHECK(cu.Init(0));
    CHECK(cu.DeviceGet(&dev, 0));
    CHECK(cu.PrimaryCtxRetain(&ctx, dev));
    CHECK(cu.CtxSetCurrent(ctx));
    CHECK(cu.ModuleLoadData(&mod, image));
    CHECK(cu.ModuleGetFunction(&fn, mod, argv[2]));
    CUdeviceptr out, a, b;
    CHECK(cu.MemAlloc(&out, 4096));
    CHECK(cu.MemAlloc(&a, 4096));
    CHECK(cu.MemAlloc(&b, 4096));
    CHECK(cu.MemsetD32(a, 0, 1024));
    CHECK(cu.MemsetD32(b, 0, 1024));
    CHECK(cu.StreamCreate(&stream, 1u)); /* non-blocking */
    void *params[3] = {&out, &a, &b};
    CHECK(cu.StreamBeginCapture(stream, 2)); /* CU_STREAM_CAPTURE_MODE_RELAXED */
    for (long i = 0; i < nodes; i++)
        CHECK(cu.LaunchKernel(fn, 8, 1, 1, 128, 1, 1, 0, stream, params, NULL));
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cu.StreamEndCapture(stream, &graph));
    CHECK(cu.GraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 100; i++)
        CHECK(cu.GraphLaunch(exec, stream));
    CHECK(cu.CtxSynchronize());
    double *enq = malloc((size_t)rounds * sizeof *enq);
    for (long r = 0; r < rounds; r++) {
        double t0 = now_s();
        for (long i = 0; i < k; i++)
            CHECK(cu.GraphLaunch(exec, stream));
        double t1 = now_s();
        CHECK(cu.CtxSynchronize());
        enq[r] = (t1 - t0) * 1e6 / (double)k;
    }
    qsort(enq, (size_t)rounds, sizeof *enq, cmp);
    printf("graph_floor_us_enqueue=%.6f\n", enq[rounds / 2]);
    return 0;
}
