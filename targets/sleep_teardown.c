/*
 * sleep_teardown.c — a teardown "protected" by a sleep.
 *
 * main hands a buffer to a worker thread, which checksums it in a loop; main
 * then sleeps 500 µs "to give the worker time to finish", frees the buffer
 * and allocates and fills another one of the same size.
 *
 * Bug: sleep is not synchronization. On a loaded machine the worker can be
 *      descheduled for longer than 500 µs, and main frees the buffer while
 *      the worker still reads it. A simulator whose clock only moves with
 *      the program's own steps never sees it: the worker always finishes
 *      within 500 µs of virtual time. Found only by a strategy that may let
 *      time pass while threads are runnable (heddle's `+stall`).
 *
 * Under heddle: verdict `use-after-free` (the memory checker sees the read
 *      of freed memory); without a memory checker, `assertion` when the
 *      worker reads the new block's bytes.
 *
 * -DFIXED: main joins the worker before freeing the buffer.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heddle.h"

#define SIZE 32
#define PASSES 4

static unsigned char *volatile shared;
static unsigned checksum;

static void *worker(void *arg) {
    (void)arg;
    unsigned sum = 0;
    for (int pass = 0; pass < PASSES; pass++)
        for (int i = 0; i < SIZE; i++) {
            unsigned char c = shared[i];
            heddle_assert(c == 7, "worker read bytes it did not expect (buffer reused)");
            sum += c;
        }
    checksum = sum;
    return NULL;
}

int main(void) {
    unsigned char *buf = malloc(SIZE);
    memset(buf, 7, SIZE);
    shared = buf;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
#ifdef FIXED
    pthread_join(t, NULL);
#endif
    usleep(500); /* "long enough" for the worker */
    free(buf);
    unsigned char *other = malloc(SIZE); /* the allocator hands the block back */
    memset(other, 9, SIZE);
#ifndef FIXED
    pthread_join(t, NULL);
#endif
    free(other);
    printf("checksum = %u\n", checksum);
    heddle_assert(checksum == 7u * SIZE * PASSES, "wrong checksum");
    return 0;
}
