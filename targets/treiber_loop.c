/*
 * treiber_loop.c — ABA in a lock-free (Treiber) stack used in a loop by
 * three threads that each take one node at a time.
 *
 * The stack starts as A -> B -> C (a static pool, no malloc). Each thread
 * repeats: pop a node, use it, push it back. push and pop swap `head` with a
 * compare-and-swap that only checks that head still points to the node
 * read at the start.
 *
 * Bug: three threads and several preemptions at precise points:
 *        t1: pop reads head = A and A->next = B ... preempted
 *        t2: pops A                                (B -> C)
 *        t3: pops B                                (C)
 *        t2: pushes A back                         (A -> C)
 *        t1: CAS(head: A -> B) succeeds            (B -> C, but t3 holds B)
 *      t1 now holds A and the stack hands B out a second time, or, when t3
 *      gives B back, B->next = B and C is lost.
 *
 * Under heddle: verdict `assertion` — "node popped twice" in a thread, or
 *      a cycle / missing node in main's final walk of the stack.
 *
 * -DFIXED: head is one 64-bit word, node index + version; every successful
 *      CAS bumps the version, so t1's stale CAS fails.
 *
 * Args: [iterations per thread, default 3, 1..50]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define NODES 3
#define THREADS 3

struct node {
    struct node *next; /* read concurrently: __atomic builtins */
    int in_use;
};

static struct node pool[NODES];
static int iterations = 3;

#ifdef FIXED
static uint64_t head; /* version << 32 | (index + 1); low half 0 = empty */

static struct node *node_of(uint64_t h) { return (uint32_t)h ? &pool[(uint32_t)h - 1] : NULL; }
static uint64_t next_head(struct node *n, uint64_t old) {
    return ((old >> 32) + 1) << 32 | (n ? (uint64_t)(n - pool) + 1 : 0);
}

static void push(struct node *n) {
    uint64_t old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    do {
        __atomic_store_n(&n->next, node_of(old), __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&head, &old, next_head(n, old), 0, __ATOMIC_RELEASE,
                                          __ATOMIC_ACQUIRE));
}

static struct node *pop(void) {
    uint64_t old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    struct node *top;
    do {
        top = node_of(old);
        if (!top)
            return NULL;
    } while (!__atomic_compare_exchange_n(&head, &old,
                                          next_head(__atomic_load_n(&top->next, __ATOMIC_RELAXED), old),
                                          0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
    return top;
}

static struct node *top_node(void) { return node_of(head); }
#else
static struct node *head;

static void push(struct node *n) {
    struct node *old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    do {
        __atomic_store_n(&n->next, old, __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&head, &old, n, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
}

static struct node *pop(void) {
    struct node *old = __atomic_load_n(&head, __ATOMIC_ACQUIRE), *next;
    do {
        if (!old)
            return NULL;
        next = __atomic_load_n(&old->next, __ATOMIC_RELAXED);
        /* BUG: succeeds whenever head == old, even if old left and came back */
    } while (!__atomic_compare_exchange_n(&head, &old, next, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
    return old;
}

static struct node *top_node(void) { return head; }
#endif

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < iterations; i++) {
        struct node *n = pop();
        if (!n)
            continue; /* another thread holds every node */
        heddle_assert(__atomic_exchange_n(&n->in_use, 1, __ATOMIC_ACQ_REL) == 0,
                      "ABA: node popped twice (another thread holds it)");
        __atomic_store_n(&n->in_use, 0, __ATOMIC_RELEASE);
        push(n);
    }
    return NULL;
}

int main(int argc, char **argv) {
    iterations = argc > 1 ? atoi(argv[1]) : 3;
    if (iterations < 1 || iterations > 50) {
        fprintf(stderr, "usage: treiber_loop [iterations 1..50]\n");
        return 2;
    }
    for (int i = NODES - 1; i >= 0; i--)
        push(&pool[i]);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);

    int seen[NODES] = {0}, count = 0;
    char msg[96];
    for (struct node *n = top_node(); n && count <= NODES; n = n->next, count++) {
        snprintf(msg, sizeof msg, "ABA: node %d appears twice in the stack (cycle)", (int)(n - pool));
        heddle_assert(!seen[n - pool], msg);
        seen[n - pool] = 1;
    }
    snprintf(msg, sizeof msg, "ABA: the stack holds %d of %d nodes after all were given back",
             count, NODES);
    heddle_assert(count == NODES, msg);
    printf("stack holds %d nodes\n", count);
    return 0;
}
