/*
 * atomics_c11.c — a tiny work queue with C11 <stdatomic.h> and pthreads:
 * workers claim numbered jobs through a small helper, add their results to
 * a shared sum and hand a final message to main.
 *
 * The site-table test (tests/e2e/site_table.rs) expects one site per
 * synchronisation operation below, on the operation's own line, whatever the
 * optimisation level; keep each operation on its own line (and update the
 * test's expected lines when this file changes).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define WORKERS 3
#define JOBS 6

static atomic_int next_job;
static atomic_long sum;
static atomic_int owner = -1;
static atomic_int done;
static int message;

/* Takes the next job number, or -1 when none is left. */
static int claim_job(void) {
    int job = atomic_load_explicit(&next_job, memory_order_acquire);
    while (job < JOBS) {
        if (atomic_compare_exchange_strong(&next_job, &job, job + 1))
            return job;
    }
    return -1;
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    int mine = 0;
    for (int job; (job = claim_job()) >= 0;) {
        atomic_fetch_add(&sum, job * job);
        mine++;
    }
    int nobody = -1;
    if (atomic_compare_exchange_strong(&owner, &nobody, id)) {
        message = 100 + id;
        atomic_thread_fence(memory_order_seq_cst);
        atomic_store(&done, 1);
    }
    printf("worker %d: %d jobs\n", id, mine);
    return NULL;
}

int main(void) {
    pthread_t threads[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    int got = atomic_load_explicit(&done, memory_order_acquire) ? message : 0;
    long total = atomic_load(&sum);
    printf("sum %ld, message %d\n", total, got);
    return total == 55 && got >= 100 ? 0 : 1;
}
