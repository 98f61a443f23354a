/* thpool — a small thread pool. Workers take jobs from a queue;
 * thpool_pause() holds every worker (with SIGUSR1 and a handler) until
 * thpool_resume(). */
#ifndef THPOOL_H
#define THPOOL_H

typedef struct thpool thpool;

/* A pool of `workers` threads; NULL on failure. */
thpool *thpool_init(int workers);

/* Queues fn(arg); 0 on success, -1 on failure. */
int thpool_add_work(thpool *p, void (*fn)(void *), void *arg);

/* Returns when the queue is empty and no job is running. */
void thpool_wait(thpool *p);

/* Holds every worker and returns once all are held: until
 * thpool_resume(), no job runs and no job is half done. */
void thpool_pause(thpool *p);
void thpool_resume(thpool *p);

/* Waits for the jobs, then stops and frees the pool. */
void thpool_destroy(thpool *p);

#endif
