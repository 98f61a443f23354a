/*
 * mutex_kinds.c — every kind of pthread mutex, locked and unlocked from
 * user code (heddle inlines the default mutex's fast path at these calls;
 * the other kinds, and a contended default mutex, go through the C
 * library). argv[1]:
 *   kinds  (default) default, recursive and errorcheck mutexes, trylock
 *          against a held mutex, and a condition variable whose waiters
 *          re-take the mutex; passes under every schedule;
 *   freed  locks a default mutex in freed heap memory (a use after free);
 *   null   locks a null mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "heddle.h"

#define WORKERS 3
#define ROUNDS 2

static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t recursive;
static pthread_mutex_t checked;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int count;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&plain);
        count++;
        pthread_cond_signal(&changed);
        pthread_mutex_unlock(&plain);
        pthread_mutex_lock(&recursive);
        pthread_mutex_lock(&recursive);
        count += 0;
        pthread_mutex_unlock(&recursive);
        pthread_mutex_unlock(&recursive);
    }
    return NULL;
}

static void *try_held(void *arg) {
    (void)arg;
    heddle_assert(pthread_mutex_trylock(&plain) == EBUSY, "trylock took a held default mutex");
    return NULL;
}

static int kinds(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&recursive, &a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&checked, &a);
    pthread_mutexattr_destroy(&a);

    /* A held default mutex: another thread's trylock fails. */
    pthread_t t;
    pthread_mutex_lock(&plain);
    pthread_create(&t, NULL, try_held, NULL);
    pthread_join(t, NULL);
    pthread_mutex_unlock(&plain);
    heddle_assert(pthread_mutex_trylock(&plain) == 0, "trylock failed on a free default mutex");
    pthread_mutex_unlock(&plain);

    /* An errorcheck mutex says what went wrong. */
    heddle_assert(pthread_mutex_lock(&checked) == 0, "errorcheck lock");
    heddle_assert(pthread_mutex_lock(&checked) == EDEADLK, "errorcheck relock is not EDEADLK");
    heddle_assert(pthread_mutex_unlock(&checked) == 0, "errorcheck unlock");
    heddle_assert(pthread_mutex_unlock(&checked) == EPERM, "errorcheck unlock of a free mutex");

    /* Workers count under the default mutex; main waits for them all. */
    pthread_t ts[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&ts[i], NULL, worker, NULL);
    pthread_mutex_lock(&plain);
    while (count < WORKERS * ROUNDS)
        pthread_cond_wait(&changed, &plain);
    pthread_mutex_unlock(&plain);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(ts[i], NULL);
    heddle_assert(count == WORKERS * ROUNDS, "a count was lost");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "kinds";
    if (!strcmp(mode, "freed")) {
        pthread_mutex_t *m = malloc(sizeof *m);
        pthread_mutex_init(m, NULL);
        free(m);
        pthread_mutex_lock(m); /* use after free */
        return 0;
    }
    if (!strcmp(mode, "null")) {
        pthread_mutex_t *volatile m = NULL;
        pthread_mutex_lock(m); /* null mutex */
        return 0;
    }
    return kinds();
}
