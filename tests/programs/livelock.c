/*
 * livelock.c — two threads that each wait, spinning, for a flag only the
 * other would set after its own wait: no schedule lets either through.
 * Without an argument the first thread sets its flag first, so the program
 * terminates under every fair schedule.
 */
#include <pthread.h>
#include <stdatomic.h>

static atomic_int flag[2];
static int stuck;

static void *side(void *arg) {
    int me = (int)(long)arg;
    if (!stuck && me == 0)
        atomic_store(&flag[0], 1);
    while (!atomic_load(&flag[1 - me])) {
    }
    atomic_store(&flag[me], 1);
    return 0;
}

int main(int argc, char **argv) {
    (void)argv;
    stuck = argc > 1;
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, side, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    return 0;
}
