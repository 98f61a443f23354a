#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#ifdef HAVE_DLFCN_H
#include <dlfcn.h>
#endif
#ifdef HAVE_SYS_RESOURCE_H
#include <sys/resource.h>
#endif
#ifdef HAVE_SYS_SEM_H
#include <sys/ipc.h>
#include <sys/sem.h>
#endif
#include "rt.h"

#if !defined(HAVE_DLSYM) || !defined(HAVE_SEMGET) || !defined(HAVE_GETRLIMIT)
#error "this runtime needs dlsym, semget and getrlimit"
#endif

union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
};

static void *rt_self;
static int rt_sem = -1;
static long rt_workers_max;
static long rt_completed;

int rt_init(void)
{
    struct rlimit rl;
    union semun arg;

    rt_self = dlopen(NULL, RTLD_LAZY);
    if (rt_self == NULL) {
        fprintf(stderr, "rt_init: dlopen: %s\n", dlerror());
        return -1;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    rt_workers_max = (long)(rl.rlim_cur / 256);
    rt_sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    if (rt_sem < 0)
        return -1;
    arg.val = 1;
    if (semctl(rt_sem, 0, SETVAL, arg) != 0)
        return -1;
    return 0;
}

static void rt_sem_op(int delta)
{
    struct sembuf op;
    op.sem_num = 0;
    op.sem_op = delta;
    op.sem_flg = SEM_UNDO;
    if (semop(rt_sem, &op, 1) != 0)
        abort();
}

void rt_lock(void) { rt_sem_op(-1); }
void rt_unlock(void) { rt_sem_op(1); }

void *rt_find_symbol(const char *name) { return dlsym(rt_self, name); }

long rt_max_workers(void) { return rt_workers_max; }

struct rt_job {
    void (*task)(int);
    int id;
    int rounds;
};

static void *rt_worker(void *p)
{
    struct rt_job *job = p;
    int i;
    for (i = 0; i < job->rounds; i++) {
        job->task(job->id);
#ifdef FIXED
        rt_lock();
        rt_completed++;
        rt_unlock();
#else
        /* "Only read after the join": counted without the lock. */
        rt_completed++;
#endif
    }
    return NULL;
}

long rt_pool_run(const char *name, int workers, int rounds)
{
    pthread_t tids[16];
    struct rt_job jobs[16];
    void (*task)(int) = (void (*)(int))rt_find_symbol(name);
    int i;

    if (task == NULL || workers > 16 || workers > rt_workers_max)
        return -1;
    rt_completed = 0;
    for (i = 0; i < workers; i++) {
        jobs[i].task = task;
        jobs[i].id = i;
        jobs[i].rounds = rounds;
        pthread_create(&tids[i], NULL, rt_worker, &jobs[i]);
    }
    for (i = 0; i < workers; i++)
        pthread_join(tids[i], NULL);
    return rt_completed;
}
