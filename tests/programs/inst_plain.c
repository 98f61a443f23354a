/* How plain runs (runner/src/runtime/plain.rs) end, for
 * tests/e2e/instrument.rs. argv[1] picks the behaviour:
 *   pass          print and return 0
 *   exit          a second thread calls exit(3) while main sleeps in a loop
 *   trap          a second thread stores out of bounds while main sleeps
 *   assert        a second thread fails heddle_assert("boom")
 *   pthread_exit  a second thread calls pthread_exit(7); main exits with the
 *                 value it joins (works only instrumented: heddle's
 *                 call_catching unwinds the thread) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heddle.h"

static volatile int never;

static void *exiter(void *arg) {
    (void)arg;
    printf("exiting\n");
    exit(3);
}

static void *trapper(void *arg) {
    (void)arg;
    *(volatile int *)0x7ffffff0 = 1;
    return NULL;
}

static void *asserter(void *arg) {
    (void)arg;
    heddle_assert(never, "boom");
    return NULL;
}

static void *leaver(void *arg) {
    (void)arg;
    pthread_exit((void *)(intptr_t)7);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "pass";
    void *(*fn)(void *) = NULL;
    if (!strcmp(what, "exit"))
        fn = exiter;
    else if (!strcmp(what, "trap"))
        fn = trapper;
    else if (!strcmp(what, "assert"))
        fn = asserter;
    else if (!strcmp(what, "pthread_exit"))
        fn = leaver;
    if (!fn) {
        printf("pass\n");
        return 0;
    }
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    if (fn == leaver) {
        void *ret = NULL;
        pthread_join(t, &ret);
        return (int)(intptr_t)ret;
    }
    while (!never)
        usleep(1000);
    return 1;
}
