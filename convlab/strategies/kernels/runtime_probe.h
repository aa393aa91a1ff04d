/* A cache line passed back and forth between two OpenMP threads: how far apart the cores
 * that run them are. On a 2-vCPU VM a probe of this kind measured
 * 0.05-0.15 us per round trip, and about 0.34 us (with 4 MiB written by one thread and
 * read by the other taking twice as long, while each thread's own data kept its speed)
 * in the "slow spells" during which the algorithms that pass data between their threads
 * slowed down: the host then seems to run the two vCPUs on cores that share no cache. */
#ifndef CONVLAB_RUNTIME_PROBE_H
#define CONVLAB_RUNTIME_PROBE_H
#include <stdint.h>
#include <time.h>
#include "omp_shim.h"

/* Give up when the round trips have taken this long (the two threads may not run at once,
 * as on a single core, where each wait lasts a scheduler time slice): the probe must
 * never hang, nor hold up a bench. */
#define CL_PROBE_MAX_SECONDS 0.25

static double cl_probe_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds per round trip over `rounds` round trips between threads 0 and 1, or -1.0 when
 * two threads did not run at once (no OpenMP, one thread granted, a wait given up). */
static double cl_core_round_trip(long rounds)
{
#if CONVLAB_HAVE_OPENMP
    int64_t flag = 0;
    int failed = 0, team = 0;
    double start = 0.0, stop = 0.0;
#pragma omp parallel num_threads(2)
    {
        const int me = omp_get_thread_num();
#pragma omp single
        team = omp_get_num_threads();
        /* the implicit barrier of single: both threads know the team size */
        if (team == 2) {
            const double deadline = cl_probe_seconds() + CL_PROBE_MAX_SECONDS;
            if (me == 0)
                start = cl_probe_seconds();
            for (long i = 0; i < rounds; i++) {
                const int64_t wait_for = 2 * i + me, next = 2 * i + me + 1;
                long polls = 0;
                while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != wait_for) {
                    if ((++polls & 1023) == 0
                        && (__atomic_load_n(&failed, __ATOMIC_RELAXED)
                            || cl_probe_seconds() > deadline)) {
                        __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
                        break;
                    }
                }
                if (__atomic_load_n(&failed, __ATOMIC_RELAXED))
                    break;
                __atomic_store_n(&flag, next, __ATOMIC_RELEASE);
            }
            if (me == 0)
                stop = cl_probe_seconds();
        }
    }
    if (team != 2 || failed || rounds <= 0)
        return -1.0;
    return (stop - start) / (double)rounds;
#else
    (void)rounds;
    return -1.0;
#endif
}
#endif
