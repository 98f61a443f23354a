/* Undefined behaviour clang turns into a trap at -O1 (heddle's default):
 * the worker stores through a pointer it knows is null, so its code after
 * the lock is a wasm `unreachable`. heddle must name the worker's line and
 * say what such a trap usually means. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg) {
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
    int *slot = NULL;
    *slot = counter; /* undefined: a trap at -O1 */
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("%d\n", counter);
    return 0;
}
