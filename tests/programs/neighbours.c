/*
 * neighbours.c — threads that each own a few bytes of shared words: a
 * `bool` per worker in one array, a `char` tag per worker, the two
 * `short` halves of a struct, a byte-wide counter per worker. Distinct
 * objects are distinct memory locations (C11 3.14): none of this races.
 * With -DRACY two workers share one slot.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define WORKERS 4

struct halves {
    short lo;
    short hi;
};

static bool done[WORKERS];
static char tags[WORKERS + 1];
static struct halves pair;
static unsigned char counts[WORKERS];

static int slot_of(int id) {
#ifdef RACY
    return id == 1 ? 0 : id;
#else
    return id;
#endif
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    int slot = slot_of(id);
    for (int i = 0; i < 3; i++)
        counts[slot]++;
    tags[slot] = (char)('a' + id);
    if (id == 0)
        pair.lo = 7;
    else if (id == 1)
        pair.hi = 9;
    done[slot] = true;
    return NULL;
}

int main(void) {
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    int all = 1;
    for (int i = 0; i < WORKERS; i++)
        all &= done[i];
    printf("%s %d %d %d all=%d\n", tags, pair.lo, pair.hi, counts[0], all);
    return 0;
}
