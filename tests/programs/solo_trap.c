/* A thread that runs alone through many plain accesses (the fast path lets
 * it skip their yield points) and then traps on an out-of-bounds one, in
 * the same function and loop: the steps a run reports at the trap must not
 * depend on whether the skipped yield points were seen. A second thread
 * takes part first, so that the run has decisions to compare too. */
#include <pthread.h>
#include <stdio.h>

static volatile unsigned sink;
static volatile int shared;

static void *worker(void *arg) {
    (void)arg;
    shared = 1;
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("shared %d\n", shared);
    /* One read a page from the start of memory until past its end. */
    for (unsigned long a = 4096;; a += 4096)
        sink += *(volatile unsigned *)a;
    return 0;
}
