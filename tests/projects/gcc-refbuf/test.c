/* Workers each take a reference to a shared buffer, write their mark into
 * it and drop the reference; the main thread drops its own at the end. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "refbuf.h"

#define WORKERS 3

static void *worker(void *arg) {
    struct refbuf *b = arg;
    static int next;
    int id = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
    refbuf_data(b)[id] = (char)('a' + id);
    refbuf_put(b);
    return NULL;
}

int main(void) {
    struct refbuf *b = refbuf_new(16);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, refbuf_get(b));
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("marks: %.*s\n", WORKERS, refbuf_data(b));
    refbuf_put(b);
    return 0;
}
