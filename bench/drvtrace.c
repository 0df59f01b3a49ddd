/* drvtrace: the driver entry points Thork reaches through ctypes and its native launcher
 * (function_address), with every call recorded: which call, its arguments, and the
 * CLOCK_MONOTONIC nanoseconds at entry and at return (bench/drvtrace.py reads them).
 *
 * Two modes, chosen by drvtrace_init():
 *   forward (real != NULL): each entry point calls the real libcuda's, so the trace is the
 *     host side of a real GPU run (when each call was made and how long it blocked);
 *   fake (real == NULL): no GPU. "Device" memory is host memory from malloc, copies are
 *     memmove at once (so values can be checked), a launch calls the hook set with
 *     drvtrace_on_launch (or nothing), synchronizations return at once.
 *
 * Build: cc -O2 -shared -fPIC -o drvtrace.so drvtrace.c -ldl -lpthread
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUcontext;
typedef uint64_t CUdeviceptr;

enum {
    T_CTX_GET = 1, T_CTX_SET, T_LAUNCH, T_ALLOC, T_FREE, T_HTOD, T_DTOH, T_EV_RECORD,
    T_EV_SYNC, T_STREAM_SYNC, T_EV_CREATE, T_EV_DESTROY, T_STREAM_WAIT, T_MARK
};

typedef struct {
    int64_t id;      /* T_* */
    int64_t enter;   /* ns, CLOCK_MONOTONIC */
    int64_t leave;   /* ns */
    uint64_t a, b, c; /* arguments: addresses, sizes, stream (per call, see drvtrace.py) */
} record_t;

#define MAXREC (1 << 16)
static record_t recs[MAXREC];
static long nrec;
static int on;
static void *real;
static void (*launch_hook)(void **params, unsigned gx, unsigned bx);
static CUcontext current;
static int fake_work = 1;  /* fake mode: copy bytes and run the launch hook (0: only record) */

/* Fake mode's pool: freed blocks are kept by size and handed out again (as the driver's
 * stream-ordered pool does), so a steady loop neither maps nor faults in new memory. */
#define NFREE 64
static struct { void *p; size_t n; } freed[NFREE];
static int nfreed;
#define NLIVE 1024
static struct { void *p; size_t n; } live[NLIVE];
static int nlive;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;  /* fake pool: calls race */
long drvtrace_live(void) { return nlive; }

static int64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static record_t *begin(int id, uint64_t a, uint64_t b, uint64_t c) {
    if (!on) return NULL;
    long i = __atomic_fetch_add(&nrec, 1, __ATOMIC_RELAXED);
    if (i >= MAXREC) return NULL;
    record_t *r = &recs[i];
    r->id = id; r->a = a; r->b = b; r->c = c;
    r->enter = now();
    r->leave = 0;
    return r;
}

static void end(record_t *r) {
    if (r) r->leave = now();
}

static void *fn(const char *name) { return real ? dlsym(real, name) : NULL; }

/* ---- control, called from Python ---------------------------------------------------- */
int drvtrace_init(const char *libcuda) {
    if (libcuda && *libcuda) {
        real = dlopen(libcuda, RTLD_NOW | RTLD_LOCAL);
        return real ? 0 : 1;
    }
    real = NULL;
    return 0;
}
void drvtrace_on_launch(void (*hook)(void **, unsigned, unsigned)) { launch_hook = hook; }
void drvtrace_fake_work(int yes) { fake_work = yes; }
void drvtrace_start(void) { nrec = 0; on = 1; }
void drvtrace_stop(void) { on = 0; }
long drvtrace_count(void) { return nrec < MAXREC ? nrec : MAXREC; }
record_t *drvtrace_records(void) { return recs; }
void drvtrace_mark(uint64_t what) { end(begin(T_MARK, what, 0, 0)); }
int64_t drvtrace_now(void) { return now(); }

/* ---- the driver's entry points ------------------------------------------------------ */
/* Call the real entry point of the same name (looked up once). */
#define FORWARD(type, ...) do { \
        static __typeof__(type) fwd; \
        if (!fwd) fwd = (__typeof__(type))fn(__func__); \
        err = fwd ? fwd(__VA_ARGS__) : 999; \
    } while (0)

CUresult cuCtxGetCurrent(CUcontext *ctx) {
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUcontext *), ctx); }
    else *ctx = current;
    return err;  /* not recorded: the launcher's guard calls it every launch */
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    record_t *r = begin(T_CTX_SET, (uint64_t)(uintptr_t)ctx, 0, 0);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUcontext), ctx); }
    else current = ctx;
    end(r);
    return err;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream stream,
                        void **params, void **extra) {
    record_t *r = begin(T_LAUNCH, (uint64_t)gx * gy * gz, (uint64_t)bx * by * bz,
                        (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) {
        FORWARD(CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **),
                f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    } else if (launch_hook && fake_work) {
        launch_hook(params, gx, bx);
    }
    end(r);
    return err;
}

CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t n, CUstream stream) {
    record_t *r = begin(T_ALLOC, n, 0, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUdeviceptr *, size_t, CUstream), ptr, n, stream); }
    else {
        void *p = NULL;
        pthread_mutex_lock(&pool_lock);
        for (int i = 0; i < nfreed; i++) {
            if (freed[i].n == n) {
                p = freed[i].p;
                freed[i] = freed[--nfreed];
                break;
            }
        }
        if (!p) {
            p = malloc(n ? n : 1);
            if (p) memset(p, 0xCD, n); /* fresh device memory holds garbage */
        } else if (fake_work) {
            memset(p, 0xCD, n); /* a reused block holds the last user's bytes: poison them */
        }
        if (p && nlive < NLIVE) {
            live[nlive].p = p;
            live[nlive++].n = n;
        }
        pthread_mutex_unlock(&pool_lock);
        *ptr = (CUdeviceptr)(uintptr_t)p;
        err = p ? 0 : 2;  /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    if (r) r->a = *ptr, r->b = n;
    end(r);
    return err;
}

CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
    record_t *r = begin(T_FREE, ptr, 0, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUdeviceptr, CUstream), ptr, stream); }
    else {
        size_t n = 0;  /* the block's size, from the table of live blocks */
        pthread_mutex_lock(&pool_lock);
        for (int i = 0; i < nlive; i++) {
            if (live[i].p == (void *)(uintptr_t)ptr) {
                n = live[i].n;
                live[i] = live[--nlive];
                break;
            }
        }
        if (n && nfreed < NFREE) {
            freed[nfreed].p = (void *)(uintptr_t)ptr;
            freed[nfreed++].n = n;
        } else {
            free((void *)(uintptr_t)ptr);
        }
        pthread_mutex_unlock(&pool_lock);
    }
    end(r);
    return err;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream) {
    record_t *r = begin(T_HTOD, dst, n, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) {
        FORWARD(CUresult (*)(CUdeviceptr, const void *, size_t, CUstream), dst, src, n, stream);
    } else if (fake_work) memmove((void *)(uintptr_t)dst, src, n);
    end(r);
    return err;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream) {
    record_t *r = begin(T_DTOH, src, n, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) {
        FORWARD(CUresult (*)(void *, CUdeviceptr, size_t, CUstream), dst, src, n, stream);
    } else if (fake_work) memmove(dst, (const void *)(uintptr_t)src, n);
    end(r);
    return err;
}

CUresult cuEventRecord(CUevent ev, CUstream stream) {
    record_t *r = begin(T_EV_RECORD, (uint64_t)(uintptr_t)ev, 0, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUevent, CUstream), ev, stream); }
    end(r);
    return err;
}

CUresult cuEventSynchronize(CUevent ev) {
    record_t *r = begin(T_EV_SYNC, (uint64_t)(uintptr_t)ev, 0, 0);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUevent), ev); }
    end(r);
    return err;
}

CUresult cuStreamSynchronize(CUstream stream) {
    record_t *r = begin(T_STREAM_SYNC, 0, 0, (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUstream), stream); }
    end(r);
    return err;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent ev, unsigned flags) {
    record_t *r = begin(T_STREAM_WAIT, (uint64_t)(uintptr_t)ev, flags,
                        (uint64_t)(uintptr_t)stream);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUstream, CUevent, unsigned), stream, ev, flags); }
    end(r);
    return err;
}

static uintptr_t next_event = 0x7000;

CUresult cuEventCreate(CUevent *ev, unsigned flags) {
    record_t *r = begin(T_EV_CREATE, flags, 0, 0);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUevent *, unsigned), ev, flags); }
    else *ev = (CUevent)(next_event += 16);
    end(r);
    return err;
}

CUresult cuEventDestroy_v2(CUevent ev) {
    record_t *r = begin(T_EV_DESTROY, (uint64_t)(uintptr_t)ev, 0, 0);
    CUresult err = 0;
    if (real) { FORWARD(CUresult (*)(CUevent), ev); }
    end(r);
    return err;
}
