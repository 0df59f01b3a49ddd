/*
 * burst_loop.c - driver launches looped in C inside the calling process (a shared library
 * loaded with ctypes by bench/_floor.py): the floors that Thork's own calls are measured
 * against in the same process, on the very function, graph exec and stream Thork uses,
 * interleaved with them (bench_interop, bench_core, bench_fkl).
 *
 * Build:  cc -O2 -shared -fPIC -o burst_loop.so bench/burst_loop.c
 *
 *   double graph_burst(fn, exec, stream, k): k back-to-back calls of fn (cuGraphLaunch's
 *   address) on exec and stream; microseconds per call, or -(driver code) on a failure.
 *
 *   double launch_burst(fn, f, gx, bx, stream, p0, p1, p2, k): k back-to-back calls of fn
 *   (cuLaunchKernel's address) of the function f, grid gx x 1 x 1, block bx x 1 x 1, no
 *   dynamic shared memory, on stream, with three pointer parameters (matrix_add's
 *   out, A, B); microseconds per call, or -(driver code) on a failure. The parameter
 *   array is built once, outside the loop, as a C program's hot loop would.
 *
 * (session 17, bench/diag_hot_floor.py) Variants of launch_burst, same arguments first:
 *   launch_burst_extra(...): the parameters passed packed through `extra`
 *     (CU_LAUNCH_PARAM_BUFFER_POINTER) instead of kernelParams.
 *   launch_burst_ctx(..., get, k): cuCtxGetCurrent (get) before each launch, as a
 *     launcher that makes its context current when it is not.
 *   launch_burst_sweep(..., buf, nbytes, k): between launches, one byte of each 64-byte
 *     line of buf[0, nbytes) read: a stand-in for the interpreter's own working set,
 *     to measure what evicting the driver's lines costs its next launch.
 *   sweep_burst(buf, nbytes, k): the sweep alone (microseconds per sweep).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <time.h>

typedef int (*graph_launch_fn)(void *exec, void *stream);
typedef int (*launch_kernel_fn)(void *f, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                void *stream, void **params, void **extra);

static double elapsed_us(const struct timespec *a, const struct timespec *b, int k)
{
    return ((double)(b->tv_sec - a->tv_sec) * 1e9 + (double)(b->tv_nsec - a->tv_nsec))
        / 1e3 / k;
}

double graph_burst(void *fn, void *exec, void *stream, int k)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        int rc = ((graph_launch_fn)fn)(exec, stream);
        if (rc) return -(double)rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return elapsed_us(&a, &b, k);
}

double launch_burst(void *fn, void *f, unsigned gx, unsigned bx, void *stream,
                    unsigned long long p0, unsigned long long p1, unsigned long long p2,
                    int k)
{
    void *params[3] = {&p0, &p1, &p2};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        int rc = ((launch_kernel_fn)fn)(f, gx, 1, 1, bx, 1, 1, 0, stream, params, 0);
        if (rc) return -(double)rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return elapsed_us(&a, &b, k);
}

double launch_burst_extra(void *fn, void *f, unsigned gx, unsigned bx, void *stream,
                          unsigned long long p0, unsigned long long p1,
                          unsigned long long p2, int k)
{
    unsigned long long packed[3] = {p0, p1, p2};
    size_t size = sizeof packed;
    /* CU_LAUNCH_PARAM_BUFFER_POINTER (1), CU_LAUNCH_PARAM_BUFFER_SIZE (2), END (0) */
    void *extra[5] = {(void *)1, packed, (void *)2, &size, (void *)0};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        int rc = ((launch_kernel_fn)fn)(f, gx, 1, 1, bx, 1, 1, 0, stream, 0, extra);
        if (rc) return -(double)rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return elapsed_us(&a, &b, k);
}

typedef int (*ctx_get_fn)(void **ctx);

double launch_burst_ctx(void *fn, void *f, unsigned gx, unsigned bx, void *stream,
                        unsigned long long p0, unsigned long long p1, unsigned long long p2,
                        void *get, int k)
{
    void *params[3] = {&p0, &p1, &p2};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        void *cur = 0;
        int rc = ((ctx_get_fn)get)(&cur);
        if (rc) return -(double)rc;
        if (!cur) return -1e9;
        rc = ((launch_kernel_fn)fn)(f, gx, 1, 1, bx, 1, 1, 0, stream, params, 0);
        if (rc) return -(double)rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return elapsed_us(&a, &b, k);
}

static unsigned sweep(const volatile unsigned char *buf, size_t nbytes)
{
    unsigned acc = 0;
    for (size_t j = 0; j < nbytes; j += 64) acc += buf[j];
    return acc;
}

static volatile unsigned sink;

double launch_burst_sweep(void *fn, void *f, unsigned gx, unsigned bx, void *stream,
                          unsigned long long p0, unsigned long long p1,
                          unsigned long long p2, const unsigned char *buf, size_t nbytes,
                          int k)
{
    void *params[3] = {&p0, &p1, &p2};
    unsigned acc = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        int rc = ((launch_kernel_fn)fn)(f, gx, 1, 1, bx, 1, 1, 0, stream, params, 0);
        if (rc) return -(double)rc;
        acc += sweep(buf, nbytes);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    sink = acc;
    return elapsed_us(&a, &b, k);
}

double sweep_burst(const unsigned char *buf, size_t nbytes, int k)
{
    unsigned acc = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) acc += sweep(buf, nbytes);
    clock_gettime(CLOCK_MONOTONIC, &b);
    sink = acc;
    return elapsed_us(&a, &b, k);
}
