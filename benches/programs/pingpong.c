/* Two threads each making N accesses to a shared global. Under the `rr:0`
 * strategy every yield point switches to the other thread, so a run is
 * about 2N context switches. Measures the cost of a switch. */
#include <pthread.h>
#include <stdlib.h>

volatile int shared;
static int n;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < n; i++)
        shared = i;
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 10000;
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
