/* A small portable runtime in the style of the late 1990s: initialised
   once, a lock built on a System V semaphore, tasks found by name in the
   program itself, and a pool of worker threads. */
#ifndef RT_H
#define RT_H

int rt_init(void);
void rt_lock(void);
void rt_unlock(void);
void *rt_find_symbol(const char *name);
long rt_max_workers(void);
/* Runs the task named `name` `rounds` times in each of `workers` threads;
   returns how many runs completed. */
long rt_pool_run(const char *name, int workers, int rounds);

#endif
