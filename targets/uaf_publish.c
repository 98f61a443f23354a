/*
 * uaf_publish.c — use after free: the buffer is freed on an acknowledgement
 * that does not mean "the reader is done".
 *
 * The producer mallocs a buffer, fills it, and publishes the pointer through
 * `shared_buf`. The consumer picks the pointer up, sets `ack`, and reads the
 * buffer. The producer waits for `ack` and then frees the buffer.
 *
 * Bug: the consumer acknowledges as soon as it has *taken* the pointer, before
 *      it has *read* the buffer, so the producer's free() can come while the
 *      consumer is still reading. To make that visible without a memory
 *      checker too, the producer immediately mallocs a new block of the same
 *      size (the allocator hands the just-freed memory back) and fills it with
 *      different bytes; the consumer checks every byte it reads against what
 *      was originally written.
 *
 * Under heddle: verdict `use-after-free` when a memory checker is active (the
 *      consumer reads freed memory in every schedule where free() comes before
 *      its last read), `assertion` without one ("consumer read overwritten
 *      data") in the schedules where the new block is filled before the
 *      consumer reads it.
 *
 * -DFIXED: the consumer sets `ack` only after its last read of the buffer, so
 *      the producer's free() always happens after the consumer is done with it.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heddle.h"

#define BUF_SIZE 16

static unsigned char *shared_buf; /* published with __atomic store/load */
static int ack;                   /* consumer -> producer */
static int consumed_ok;
static unsigned char *reused_block; /* keeps the reuse observable; freed by main */

static unsigned char pattern(int i) { return (unsigned char)('a' + i); }

static void *producer(void *arg) {
    unsigned char *buf;
    (void)arg;
    heddle_thread_name("producer");

    buf = malloc(BUF_SIZE);
    for (int i = 0; i < BUF_SIZE; i++)
        buf[i] = pattern(i);
    __atomic_store_n(&shared_buf, buf, __ATOMIC_RELEASE);

    while (!__atomic_load_n(&ack, __ATOMIC_ACQUIRE)) /* ended by the consumer */
        ;
    free(buf); /* buggy: the consumer may still be reading buf */

    /* Some unrelated work allocates; the allocator reuses the freed block. */
    reused_block = malloc(BUF_SIZE);
    memset(reused_block, 0xEE, BUF_SIZE);
    heddle_event("reused");
    return NULL;
}

static void *consumer(void *arg) {
    unsigned char *buf;
    int ok = 1;
    (void)arg;
    heddle_thread_name("consumer");

    while (!(buf = __atomic_load_n(&shared_buf, __ATOMIC_ACQUIRE))) /* ended by the producer */
        ;
#ifndef FIXED
    __atomic_store_n(&ack, 1, __ATOMIC_SEQ_CST); /* BUG: "got it" is not "done with it" */
#endif
    for (int i = 0; i < BUF_SIZE; i++)
        if (buf[i] != pattern(i))
            ok = 0;
#ifdef FIXED
    __atomic_store_n(&ack, 1, __ATOMIC_SEQ_CST); /* after the last read of buf */
#endif

    heddle_assert(ok, "use after free: consumer read overwritten data from the published buffer");
    consumed_ok = ok;
    return NULL;
}

int main(void) {
    pthread_t p, c;

    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(c, NULL);
    pthread_join(p, NULL);
    free(reused_block);

    printf("consumer read %s\n", consumed_ok ? "the original data" : "overwritten data");
    return 0;
}
