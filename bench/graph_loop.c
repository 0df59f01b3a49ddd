/*
 * graph_loop.c - cuGraphLaunch looped in C inside the calling process (a shared library
 * loaded with ctypes by bench/_floor.py): the floor for Graph.replay on the very graph
 * exec and stream Thork replays, measured interleaved with it (bench_interop).
 *
 * Build:  cc -O2 -shared -fPIC -o graph_loop.so bench/graph_loop.c
 *
 *   double graph_burst(fn, exec, stream, k): k back-to-back calls of fn (cuGraphLaunch's
 *   address) on exec and stream; microseconds per call, or -(driver code) on a failure.
 */
#define _POSIX_C_SOURCE 200809L

#include <time.h>

typedef int (*graph_launch_fn)(void *exec, void *stream);

double graph_burst(void *fn, void *exec, void *stream, int k)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < k; i++) {
        int rc = ((graph_launch_fn)fn)(exec, stream);
        if (rc) return -(double)rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / k;
}
