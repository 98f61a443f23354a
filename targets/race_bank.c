/*
 * race_bank.c — lost update from a split critical section.
 *
 * Bug: deposit() reads the balance under the lock, drops the lock, takes it
 *      again and writes back local + 1. Every access is "protected", so there
 *      is no data race in the strict sense, but the read-modify-write is not
 *      atomic: two threads can both read the same balance and both write
 *      balance + 1, losing one deposit.
 *
 * Under heddle: verdict `assertion` — main's final heddle_assert fails
 *      ("lost update: ...") in every schedule where a thread is preempted
 *      between the two critical sections while another thread deposits.
 *
 * -DFIXED: the read and the write happen inside one critical section.
 *
 * Args: [N threads, default 2, max 16] [K deposits per thread, default 2]
 *      Expected balance is N*K.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define MAX_THREADS 16

static pthread_mutex_t account_lock = PTHREAD_MUTEX_INITIALIZER;
static int balance;
static int deposits_per_thread = 2;

static void deposit(void) {
#ifdef FIXED
    pthread_mutex_lock(&account_lock);
    balance = balance + 1;
    pthread_mutex_unlock(&account_lock);
#else
    int local;

    pthread_mutex_lock(&account_lock);
    local = balance; /* read ...                                  */
    pthread_mutex_unlock(&account_lock);
    /* ... another thread may deposit right here ...             */
    pthread_mutex_lock(&account_lock);
    balance = local + 1; /* ... and its deposit is overwritten.  */
    pthread_mutex_unlock(&account_lock);
#endif
}

static void *depositor(void *arg) {
    (void)arg;
    for (int i = 0; i < deposits_per_thread; i++)
        deposit();
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    int k = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t threads[MAX_THREADS];
    char msg[128];

    if (n < 1 || n > MAX_THREADS || k < 0) {
        fprintf(stderr, "usage: race_bank [threads 1..%d] [deposits >= 0]\n", MAX_THREADS);
        return 2;
    }
    deposits_per_thread = k;

    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, depositor, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);

    printf("balance = %d\n", balance);
    snprintf(msg, sizeof msg, "lost update: balance is %d, expected %d (%d threads x %d deposits)",
             balance, n * k, n, k);
    heddle_assert(balance == n * k, msg);
    return 0;
}
