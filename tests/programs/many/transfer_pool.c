/*
 * transfer_pool.c — an auditor among a pool of transfers.
 *
 * Worker i moves i + 1 units from account i % K to account (i + 1) % K:
 * it withdraws in one critical section and deposits in another. An
 * auditor thread, created after the workers, sums the accounts under the
 * lock through total() and asserts the sum is unchanged.
 *
 * Bug: the auditor sums between a worker's withdrawal and its deposit and
 *      finds money missing.
 *
 * -DFIXED: a transfer is one critical section.
 *
 * Args: [workers] (default 49)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define K 4
#define MAX 199
#define INITIAL 1000

struct transfer {
    int from;
    int to;
    int amount;
};

static int accounts[K] = {INITIAL, INITIAL, INITIAL, INITIAL};
static pthread_mutex_t bank = PTHREAD_MUTEX_INITIALIZER;

static void withdraw(int acc, int amount) {
    pthread_mutex_lock(&bank);
    accounts[acc] -= amount;
#ifndef FIXED
    pthread_mutex_unlock(&bank);
#endif
}

static void deposit(int acc, int amount) {
#ifndef FIXED
    pthread_mutex_lock(&bank);
#endif
    accounts[acc] += amount;
    pthread_mutex_unlock(&bank);
}

static int total(void) {
    int sum = 0;
    pthread_mutex_lock(&bank);
    for (int i = 0; i < K; i++)
        sum += accounts[i];
    pthread_mutex_unlock(&bank);
    return sum;
}

static void *mover(void *arg) {
    struct transfer *t = arg;
    withdraw(t->from, t->amount);
    deposit(t->to, t->amount);
    return NULL;
}

static void *auditor(void *arg) {
    (void)arg;
    assert(total() == K * INITIAL);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 49;
    if (n < 1 || n > MAX)
        return 2;
    pthread_t th[MAX + 1];
    struct transfer *ts = malloc(sizeof *ts * n);
    for (int i = 0; i < n; i++) {
        ts[i].from = i % K;
        ts[i].to = (i + 1) % K;
        ts[i].amount = i + 1;
        pthread_create(&th[i], NULL, mover, &ts[i]);
    }
    pthread_create(&th[n], NULL, auditor, NULL);
    for (int i = 0; i <= n; i++)
        pthread_join(th[i], NULL);
    free(ts);
    printf("total = %d\n", total());
    return 0;
}
