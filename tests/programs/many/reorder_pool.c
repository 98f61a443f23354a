/*
 * reorder_pool.c — a checker among a pool of setters, written the way
 * benchmark suites write it: plain globals, helper functions, thread pools
 * created in loops, counts parsed from the command line.
 *
 * Setters store a = 1 and then b = -1; checkers read the pair through
 * check() and assert that it is the initial or the final one.
 *
 * Bug: a checker that runs between some setter's two stores sees a = 1,
 *      b = 0.
 *
 * -DFIXED: the stores and the check are under one mutex.
 *
 * Args: [setters checkers] (default 49 1)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int iSet = 49;
static int iCheck = 1;

static int a = 0;
static int b = 0;

#ifdef FIXED
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&m)
#define UNLOCK() pthread_mutex_unlock(&m)
#else
#define LOCK()
#define UNLOCK()
#endif

void set(void) {
    LOCK();
    a = 1;
    b = -1;
    UNLOCK();
}

int check(void) {
    LOCK();
    int ok = (a == 0 && b == 0) || (a == 1 && b == -1);
    UNLOCK();
    return ok;
}

void *setThread(void *param) {
    (void)param;
    set();
    return NULL;
}

void *checkThread(void *param) {
    (void)param;
    if (!check()) {
        fprintf(stderr, "Bug found!\n");
        assert(0);
    }
    return NULL;
}

int main(int argc, char *argv[]) {
    int i, err;
    if (argc == 3) {
        sscanf(argv[1], "%d", &iSet);
        sscanf(argv[2], "%d", &iCheck);
    } else if (argc != 1) {
        fprintf(stderr, "./reorder_pool <setters> <checkers>\n");
        exit(-1);
    }
    pthread_t setPool[iSet];
    pthread_t checkPool[iCheck];
    for (i = 0; i < iSet; i++) {
        if (0 != (err = pthread_create(&setPool[i], NULL, &setThread, NULL))) {
            fprintf(stderr, "Error [%d] found creating set thread.\n", err);
            exit(-1);
        }
    }
    for (i = 0; i < iCheck; i++) {
        if (0 != (err = pthread_create(&checkPool[i], NULL, &checkThread, NULL))) {
            fprintf(stderr, "Error [%d] found creating check thread.\n", err);
            exit(-1);
        }
    }
    for (i = 0; i < iSet; i++) {
        if (0 != (err = pthread_join(setPool[i], NULL))) {
            fprintf(stderr, "pthread join error: %d\n", err);
            exit(-1);
        }
    }
    for (i = 0; i < iCheck; i++) {
        if (0 != (err = pthread_join(checkPool[i], NULL))) {
            fprintf(stderr, "pthread join error: %d\n", err);
            exit(-1);
        }
    }
    return 0;
}
