/* test_pause WORKERS TRANSFERS — transfers between accounts run as jobs;
 * while the pool is paused the test audits the accounts without the bank's
 * lock (nothing runs), and once more after the jobs are done. */
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

#include "thpool.h"

#define ACCOUNTS 4
#define START 100

static long balance[ACCOUNTS];
static pthread_mutex_t bank = PTHREAD_MUTEX_INITIALIZER;

struct transfer {
    int from, to;
    long amount;
};

static void do_transfer(void *arg) {
    struct transfer *t = arg;
    pthread_mutex_lock(&bank);
    balance[t->from] -= t->amount;
    balance[t->to] += t->amount;
    pthread_mutex_unlock(&bank);
}

static long audit(const char *when) {
    long sum = 0;
    for (int i = 0; i < ACCOUNTS; i++)
        sum += balance[i];
    printf("%s: %ld %ld %ld %ld (sum %ld)\n", when, balance[0], balance[1], balance[2],
           balance[3], sum);
    return sum;
}

int main(int argc, char **argv) {
    int workers = argc > 1 ? atoi(argv[1]) : 2;
    int transfers = argc > 2 ? atoi(argv[2]) : 16;
    for (int i = 0; i < ACCOUNTS; i++)
        balance[i] = START;

    struct transfer *ts = calloc((size_t)transfers, sizeof *ts);
    thpool *pool = thpool_init(workers);
    if (!ts || !pool)
        return 2;
    for (int i = 0; i < transfers; i++) {
        ts[i] = (struct transfer){i % ACCOUNTS, (i + 1) % ACCOUNTS, 1 + i % 7};
        thpool_add_work(pool, do_transfer, &ts[i]);
    }

    thpool_pause(pool);
    long paused = audit("paused");
    thpool_resume(pool);
    thpool_wait(pool);
    long done = audit("done");
    thpool_destroy(pool);
    free(ts);
    if (paused != ACCOUNTS * START || done != ACCOUNTS * START) {
        fprintf(stderr, "money created or lost\n");
        return 1;
    }
    return 0;
}
