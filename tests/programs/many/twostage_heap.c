/*
 * twostage_heap.c — an update in two critical sections among a pool of
 * updaters, benchmark-suite style: mutexes allocated and initialised at run
 * time, lock/unlock through helpers, pools created in loops.
 *
 * Updaters set data1 = 1 under lock 1, then data2 = data1 + 1 under lock 2.
 * Readers take lock 1, return if data1 is 0, else read data2 under lock 2
 * and assert data2 == data1 + 1.
 *
 * Bug: a reader between an updater's two critical sections sees data1 = 1,
 *      data2 = 0.
 *
 * -DFIXED: updaters hold lock 1 across both stages and readers take lock 1
 *      around both reads.
 *
 * Args: [updaters readers] (default 99 1)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int iTThreads = 99;
static int iRThreads = 1;
static int data1Value = 0;
static int data2Value = 0;
pthread_mutex_t *data1Lock;
pthread_mutex_t *data2Lock;

void lock(pthread_mutex_t *m) {
    int err;
    if (0 != (err = pthread_mutex_lock(m))) {
        fprintf(stderr, "pthread_mutex_lock error: %d\n", err);
        exit(-1);
    }
}

void unlock(pthread_mutex_t *m) {
    int err;
    if (0 != (err = pthread_mutex_unlock(m))) {
        fprintf(stderr, "pthread_mutex_unlock error: %d\n", err);
        exit(-1);
    }
}

void *funcA(void *param) {
    (void)param;
    lock(data1Lock);
    data1Value = 1;
#ifndef FIXED
    unlock(data1Lock);
#endif
    lock(data2Lock);
    data2Value = data1Value + 1;
    unlock(data2Lock);
#ifdef FIXED
    unlock(data1Lock);
#endif
    return NULL;
}

void *funcB(void *param) {
    (void)param;
    int t1 = -1;
    int t2 = -1;
    lock(data1Lock);
    if (data1Value == 0) {
        unlock(data1Lock);
        return NULL;
    }
    t1 = data1Value;
#ifndef FIXED
    unlock(data1Lock);
#endif
    lock(data2Lock);
    t2 = data2Value;
    unlock(data2Lock);
#ifdef FIXED
    unlock(data1Lock);
#endif
    if (t2 != (t1 + 1)) {
        fprintf(stderr, "Bug found!\n");
        assert(0);
    }
    return NULL;
}

int main(int argc, char *argv[]) {
    int i, err;
    if (argc == 3) {
        sscanf(argv[1], "%d", &iTThreads);
        sscanf(argv[2], "%d", &iRThreads);
    } else if (argc != 1) {
        fprintf(stderr, "./twostage_heap <updaters> <readers>\n");
        exit(-1);
    }
    data1Lock = (pthread_mutex_t *)malloc(sizeof(pthread_mutex_t));
    data2Lock = (pthread_mutex_t *)malloc(sizeof(pthread_mutex_t));
    if (0 != (err = pthread_mutex_init(data1Lock, NULL)) ||
        0 != (err = pthread_mutex_init(data2Lock, NULL))) {
        fprintf(stderr, "pthread_mutex_init error: %d\n", err);
        exit(-1);
    }
    pthread_t tPool[iTThreads];
    pthread_t rPool[iRThreads];
    for (i = 0; i < iTThreads; i++) {
        if (0 != (err = pthread_create(&tPool[i], NULL, &funcA, NULL))) {
            fprintf(stderr, "Error [%d] found creating 2stage thread.\n", err);
            exit(-1);
        }
    }
    for (i = 0; i < iRThreads; i++) {
        if (0 != (err = pthread_create(&rPool[i], NULL, &funcB, NULL))) {
            fprintf(stderr, "Error [%d] found creating read thread.\n", err);
            exit(-1);
        }
    }
    for (i = 0; i < iTThreads; i++)
        pthread_join(tPool[i], NULL);
    for (i = 0; i < iRThreads; i++)
        pthread_join(rPool[i], NULL);
    pthread_mutex_destroy(data1Lock);
    pthread_mutex_destroy(data2Lock);
    free(data1Lock);
    free(data2Lock);
    return 0;
}
