/*
 * pipe_handoff.c — a worker hands a count to main through a pipe.
 *
 * The worker adds its share to `total` and then writes a byte to say it is
 * done; main waits for the byte and adds its own share. With "late" as the
 * first argument the worker says it is done before it adds: main's and the
 * worker's read-modify-writes can interleave and lose an update.
 */
#include <assert.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static int done_pipe[2];
static int total;
static int late;

static void add(int n) {
    int seen = total;
    total = seen + n;
}

static void *worker(void *arg) {
    (void)arg;
    if (!late)
        add(1);
    assert(write(done_pipe[1], "d", 1) == 1);
    if (late)
        add(1);
    return NULL;
}

int main(int argc, char **argv) {
    late = argc > 1 && strcmp(argv[1], "late") == 0;
    assert(pipe(done_pipe) == 0);
    pthread_t t;
    assert(pthread_create(&t, NULL, worker, NULL) == 0);
    char c;
    assert(read(done_pipe[0], &c, 1) == 1);
    add(10);
    pthread_join(t, NULL);
    assert(total == 11);
    return 0;
}
