/*
 * read_input.c — a lost update whose size comes from a granted file.
 *
 * Reads the number of increments per thread from /data/input.txt (granted
 * with --dir HOST:/data) and prints the file's first line. Two threads add
 * to a shared counter with a plain read-modify-write, so an interleaving
 * between one thread's read and its write loses an increment.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

static volatile int counter;
static int per_thread;

static void *adder(void *arg) {
    (void)arg;
    for (int i = 0; i < per_thread; i++) {
        int local = counter;
        counter = local + 1;
    }
    return NULL;
}

int main(void) {
    FILE *f = fopen("/data/input.txt", "r");
    if (!f) {
        printf("cannot open /data/input.txt\n");
        return 2;
    }
    char line[64] = {0};
    if (!fgets(line, sizeof line, f)) {
        printf("empty input\n");
        return 2;
    }
    fclose(f);
    per_thread = atoi(line);
    printf("input: %s", line);
    pthread_t a, b;
    pthread_create(&a, NULL, adder, NULL);
    pthread_create(&b, NULL, adder, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    char msg[80];
    snprintf(msg, sizeof msg, "lost update: counter is %d, expected %d", counter, 2 * per_thread);
    heddle_assert(counter == 2 * per_thread, msg);
    return 0;
}
