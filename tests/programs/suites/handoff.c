/*
 * handoff.c — two threads pass a token back and forth ROUNDS times (default
 * 100,000) through a shared turn variable, each spinning until it is its
 * turn; the payload they exchange must count up without a gap.
 *
 * Args: [rounds]
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int turn;
static long payload;
static long rounds = 100000;

static void *player(void *arg) {
    int me = (int)(long)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != me)
            ;
        assert(payload == 2 * i + me);
        payload++;
        atomic_store_explicit(&turn, 1 - me, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]);
    pthread_t a, b;
    pthread_create(&a, NULL, player, (void *)0L);
    pthread_create(&b, NULL, player, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("payload %ld\n", payload);
    assert(payload == 2 * rounds);
    return 0;
}
