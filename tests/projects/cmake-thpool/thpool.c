#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 500
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "thpool.h"

struct job {
    void (*fn)(void *);
    void *arg;
    struct job *next;
};

struct thpool {
    pthread_mutex_t lock;
    pthread_cond_t has_jobs;
    pthread_cond_t all_idle;
    struct job *head, *tail;
    int working;
    int stopping;
    int nthreads;
    pthread_t *threads;
};

/* The hold is process-wide: a handler cannot be given the pool. */
static atomic_int threads_on_hold;
static atomic_int threads_held;

static void thread_hold(int sig) {
    (void)sig;
    atomic_fetch_add(&threads_held, 1);
    while (atomic_load(&threads_on_hold)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    atomic_fetch_sub(&threads_held, 1);
}

static struct job *take(thpool *p) {
    pthread_mutex_lock(&p->lock);
    while (!p->head && !p->stopping)
        pthread_cond_wait(&p->has_jobs, &p->lock);
    struct job *j = p->head;
    if (j) {
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        p->working++;
    }
    pthread_mutex_unlock(&p->lock);
    return j;
}

static void *worker(void *arg) {
    thpool *p = arg;
#ifdef FIXED
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
#endif
    struct job *j;
    while ((j = take(p)) != NULL) {
#ifdef FIXED
        /* A pause waits for the job to end: the signal stays pending. */
        pthread_sigmask(SIG_BLOCK, &usr1, NULL);
#endif
        j->fn(j->arg);
#ifdef FIXED
        pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
#endif
        free(j);
        pthread_mutex_lock(&p->lock);
        if (--p->working == 0 && !p->head)
            pthread_cond_broadcast(&p->all_idle);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

thpool *thpool_init(int workers) {
    /* Before any worker exists: a pause may come before a worker ran. */
    struct sigaction act;
    sigemptyset(&act.sa_mask);
    act.sa_flags = 0;
    act.sa_handler = thread_hold;
    if (sigaction(SIGUSR1, &act, NULL) != 0)
        return NULL;
    thpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)workers, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->has_jobs, NULL);
    pthread_cond_init(&p->all_idle, NULL);
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
            break;
        p->nthreads++;
    }
    return p;
}

int thpool_add_work(thpool *p, void (*fn)(void *), void *arg) {
    struct job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->has_jobs);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void thpool_wait(thpool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->head || p->working)
        pthread_cond_wait(&p->all_idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void thpool_pause(thpool *p) {
    atomic_store(&threads_on_hold, 1);
    for (int i = 0; i < p->nthreads; i++)
        pthread_kill(p->threads[i], SIGUSR1);
    while (atomic_load(&threads_held) < p->nthreads)
        sched_yield();
}

void thpool_resume(thpool *p) {
    (void)p;
    atomic_store(&threads_on_hold, 0);
}

void thpool_destroy(thpool *p) {
    thpool_wait(p);
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->has_jobs);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->all_idle);
    pthread_cond_destroy(&p->has_jobs);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}
