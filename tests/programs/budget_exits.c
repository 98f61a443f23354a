/* Every way a user function can be left or re-entered, in loops that have
 * no yield point at granularity `sync` (so each iteration is a budget
 * point): an early return from inside a loop, a `switch` that returns
 * (br_table), recursion, calls through a function pointer, a loop that
 * calls a function with a loop of its own, and a goto out of a nest. The
 * tests run it with the preemption budget kept in a local and in the
 * global, and require the same events. Three threads share a plain
 * counter (racy on purpose, so the schedule shows in the output). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned shared;
static volatile int sink;

__attribute__((noinline)) static int find(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return i; /* a return from inside the loop */
    return -1;
}

__attribute__((noinline)) static int classify(int k) {
    int acc = 0;
    for (int i = 0; i < k; i++) {
        switch ((i * 7 + k) % 6) {
        case 0: acc += 3; break;
        case 1: acc ^= i; break;
        case 2: if (acc > 40) return acc; break; /* return from a br_table arm */
        case 3: acc -= 1; break;
        case 4: acc += i; break;
        default: continue;
        }
        sink = acc;
    }
    return acc;
}

__attribute__((noinline)) static int depth(int n) {
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += i;
    return n == 0 ? s : s + depth(n - 1); /* recursion */
}

static int twice(int x) { return 2 * x; }
static int inc(int x) { return x + 1; }
static int (*const ops[2])(int) = {twice, inc};

__attribute__((noinline)) static int nest(int n) {
    int c = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            c += i ^ j;
            if (c > 5 * n)
                goto out; /* leaves two loops at once */
        }
out:
    return c;
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    int v[32];
    for (int i = 0; i < 32; i++)
        v[i] = (i * 13 + id) % 32;
    int total = 0;
    for (int round = 0; round < 6; round++) {
        total += find(v, 32, (round * 5 + id) % 40);
        total += classify(10 + round * 3 + id);
        total += depth(round + id);
        total = ops[(round + id) & 1](total) % 100000; /* call_indirect */
        total += nest(4 + round);
        unsigned s = shared; /* a plain read-modify-write: racy */
        for (int k = 0; k < id + 2; k++)
            sink = k;
        shared = s + 1;
    }
    return (void *)(long)total;
}

int main(void) {
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    long sum = 0;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
    }
    printf("totals %ld shared %u\n", sum, shared);
    return 0;
}
