/*
 * spin_barrier.c — publishing data through a plain (volatile) flag.
 *
 * Bug: the writer stores a payload and then sets `flag`; the spinner waits
 *      with `while (!flag) ;` and then reads the payload. `flag` is a plain
 *      `volatile unsigned char`, not an atomic: the concurrent write and reads
 *      of it are a data race (undefined behaviour in C11), and volatile gives
 *      no ordering between the payload and the flag on a weakly ordered CPU.
 *      A compiler barrier keeps the compiler from reordering the accesses, so
 *      on x86 (and under heddle, which runs threads one at a time with
 *      sequentially consistent memory) the program happens to work.
 *
 * Under heddle: verdict `pass` in every schedule for both variants — this is a
 *      data race that does not change the result on a sequentially consistent
 *      machine. It is here so that a race detector has something to report
 *      and to check that a spin loop ended by another thread terminates under
 *      every schedule (each read of `flag` is a yield point, so the setter
 *      always gets to run).
 *
 * -DFIXED: `flag` is `_Atomic unsigned char`, stored with memory_order_release
 *      and loaded with memory_order_acquire, which makes the payload write
 *      visible to the spinner by the C11 memory model, not by luck.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>

#include "heddle.h"

#ifdef FIXED
#include <stdatomic.h>
_Atomic unsigned char flag; /* global: visible by name */
#else
volatile unsigned char flag; /* global: visible by name */
/* Compiler-only barrier: stops the compiler reordering, not the CPU. */
#define COMPILER_BARRIER() __asm__ __volatile__("" ::: "memory")
#endif

int payload;

static void *setter(void *arg) {
    (void)arg;
    heddle_thread_name("setter");
    payload = 42;
#ifdef FIXED
    atomic_store_explicit(&flag, 1, memory_order_release);
#else
    COMPILER_BARRIER();
    flag = 1;
#endif
    return NULL;
}

static void *spinner(void *arg) {
    (void)arg;
    heddle_thread_name("spinner");
#ifdef FIXED
    while (!atomic_load_explicit(&flag, memory_order_acquire))
        ;
#else
    while (!flag)
        ;
    COMPILER_BARRIER();
#endif
    heddle_assert(payload == 42, "spinner saw the flag but not the payload written before it");
    return NULL;
}

int main(void) {
    pthread_t a, b;

    pthread_create(&a, NULL, spinner, NULL);
    pthread_create(&b, NULL, setter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);

    printf("payload = %d\n", payload);
    return 0;
}
