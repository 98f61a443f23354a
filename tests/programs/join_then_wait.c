/*
 * join_then_wait.c — a thread joined, then a wait nobody ends: the main
 * thread deadlocks in sem_wait (a futex wait in the C library, no lock or
 * join call), after a join that returned.
 */
#include <pthread.h>
#include <semaphore.h>

static sem_t never;

static void *worker(void *arg) { return arg; }

int main(void) {
    pthread_t t;
    sem_init(&never, 0, 0);
    pthread_create(&t, 0, worker, 0);
    pthread_join(t, 0);
    sem_wait(&never); /* nobody posts */
    return 0;
}
