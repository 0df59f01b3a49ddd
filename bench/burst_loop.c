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
 */
#define _POSIX_C_SOURCE 200809L

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
