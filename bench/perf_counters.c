/*
 * perf_counters.c - hardware counters of the calling thread around a stretch of code
 * (session 17, bench/diag_hot_floor.py --counters): cycles, instructions, branch misses,
 * L1 data-cache read misses and L1 instruction-cache misses, user and kernel space both
 * (a launch enters the kernel only when the driver has to). Linux perf_event_open only;
 * no privileges beyond what perf_event_paranoid allows a process for its own thread.
 *
 * Build:  cc -O2 -shared -fPIC -o perf_counters.so bench/perf_counters.c
 *
 *   int pc_open(void): open each counter on its own (a virtual machine may offer some
 *   only); a bit mask of those opened (bit i: counter i), or -errno when none opened.
 *   void pc_start(void), void pc_stop(unsigned long long out[5]): reset and enable /
 *   disable and read the counts (in the order above; ~0ULL where a counter is absent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NC 5
static int fds[NC] = {-1, -1, -1, -1, -1};

static int open_one(uint32_t type, uint64_t config)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.disabled = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

#define CACHE(id, op, res) ((id) | ((op) << 8) | ((res) << 16))

int pc_open(void)
{
    const uint32_t types[NC] = {PERF_TYPE_HARDWARE, PERF_TYPE_HARDWARE, PERF_TYPE_HARDWARE,
                                PERF_TYPE_HW_CACHE, PERF_TYPE_HW_CACHE};
    const uint64_t configs[NC] = {
        PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_BRANCH_MISSES,
        CACHE(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ,
              PERF_COUNT_HW_CACHE_RESULT_MISS),
        CACHE(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ,
              PERF_COUNT_HW_CACHE_RESULT_MISS)};
    int mask = 0, err = 0;
    for (int i = 0; i < NC; i++) {
        fds[i] = open_one(types[i], configs[i]);
        if (fds[i] >= 0)
            mask |= 1 << i;
        else
            err = errno;
    }
    return mask ? mask : -err;
}

void pc_start(void)
{
    for (int i = 0; i < NC; i++)
        if (fds[i] >= 0) {
            ioctl(fds[i], PERF_EVENT_IOC_RESET, 0);
            ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0);
        }
}

void pc_stop(unsigned long long out[NC])
{
    for (int i = 0; i < NC; i++) {
        uint64_t v = ~0ULL;
        if (fds[i] >= 0) {
            ioctl(fds[i], PERF_EVENT_IOC_DISABLE, 0);
            if (read(fds[i], &v, sizeof v) != (ssize_t)sizeof v) v = ~0ULL;
        }
        out[i] = v;
    }
}
