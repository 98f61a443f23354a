/*
 * aba_stack.c — the ABA problem in a lock-free (Treiber) stack.
 *
 * Workers share a free list of POOL_SIZE nodes from a static pool (no malloc):
 * each pops a few nodes, then pushes them back in the order taken. push and
 * pop swap `head` with a compare-and-swap.
 *
 * Bug: pop reads head = A and A->next = B, then CASes head from A to B. The
 *      CAS only checks that head is *still A*, not that the stack is
 *      unchanged. Bad schedule (stack A -> B -> C):
 *        worker 1: pop reads head = A, next = B ... preempted
 *        worker 2: pops A, pops B, gives A back          (stack A -> C)
 *        worker 1: CAS(head: A -> B) succeeds            (stack B -> C)
 *      B is on top while worker 2 holds it: the next pop hands B out twice,
 *      and when worker 2 gives B back, B->next = B and C is lost.
 *
 * Under heddle: verdict `assertion` — "node popped twice" in a worker, or a
 *      cycle / missing nodes in main's final walk of the list.
 *
 * -DFIXED: head is one 64-bit word, node index + version; every successful
 *      CAS bumps the version, so a stale CAS fails even if the top is A again.
 *
 * Args: [workers, default 3, max 4] [nodes each worker takes, default 2, max 4]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define POOL_SIZE 3
#define MAX_WORKERS 4
#define MAX_TAKE 4 /* nodes one worker takes at most */

struct node {
    struct node *next; /* accessed with __atomic builtins: read concurrently */
    int in_use;        /* 1 while some worker holds the node */
};

static struct node pool[POOL_SIZE];
static int take_per_worker = 2;

#ifdef FIXED
static uint64_t head; /* version << 32 | (node index + 1); low half 0 = empty */

static struct node *head_node(uint64_t h) {
    return (uint32_t)h ? &pool[(uint32_t)h - 1] : NULL;
}
static uint64_t make_head(struct node *n, uint64_t old) { /* bumps the version */
    return ((old >> 32) + 1) << 32 | (n ? (uint64_t)(n - pool) + 1 : 0);
}

static void push(struct node *n) {
    uint64_t old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    do {
        __atomic_store_n(&n->next, head_node(old), __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&head, &old, make_head(n, old), 0,
                                          __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
}

static struct node *pop(void) {
    uint64_t old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    struct node *top, *next;
    do {
        top = head_node(old);
        if (!top)
            return NULL;
        next = __atomic_load_n(&top->next, __ATOMIC_RELAXED); /* stale => version differs */
    } while (!__atomic_compare_exchange_n(&head, &old, make_head(next, old), 0,
                                          __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
    return top;
}
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
        /* BUG: succeeds whenever head == old, even if old was popped and pushed back */
    } while (!__atomic_compare_exchange_n(&head, &old, next, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
    return old;
}
#endif

static void *worker(void *arg) {
    struct node *taken[MAX_TAKE];
    int n = 0;
    (void)arg;
    for (int i = 0; i < take_per_worker; i++) {
        struct node *nd = pop();
        if (!nd)
            continue; /* free list empty */
        heddle_assert(__atomic_exchange_n(&nd->in_use, 1, __ATOMIC_ACQ_REL) == 0,
                      "ABA: node popped twice (it was already held by a worker)");
        taken[n++] = nd;
    }
    for (int i = 0; i < n; i++) { /* give back in the order taken */
        __atomic_store_n(&taken[i]->in_use, 0, __ATOMIC_RELEASE);
        push(taken[i]);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int workers = argc > 1 ? atoi(argv[1]) : 3;
    pthread_t threads[MAX_WORKERS];
    int seen[POOL_SIZE] = {0}, count = 0; /* for the final walk */
    char msg[128];

    take_per_worker = argc > 2 ? atoi(argv[2]) : 2;
    if (workers < 1 || workers > MAX_WORKERS || take_per_worker < 0 || take_per_worker > MAX_TAKE) {
        fprintf(stderr, "usage: aba_stack [workers 1..4] [take 0..4]\n");
        return 2;
    }

    for (int i = POOL_SIZE - 1; i >= 0; i--) /* stack: pool[0] -> pool[1] -> pool[2] */
        push(&pool[i]);
    for (int i = 0; i < workers; i++)
        pthread_create(&threads[i], NULL, worker, NULL);
    for (int i = 0; i < workers; i++)
        pthread_join(threads[i], NULL);

    /* Every node was given back: the list must hold each node exactly once. */
#ifdef FIXED
    struct node *n = head_node(head);
#else
    struct node *n = head;
#endif
    for (; n && count <= POOL_SIZE; n = n->next, count++) {
        snprintf(msg, sizeof msg, "ABA: node %d appears twice in the free list (cycle)", (int)(n - pool));
        heddle_assert(!seen[n - pool], msg);
        seen[n - pool] = 1;
    }
    printf("free list holds %d of %d nodes\n", count, POOL_SIZE);
    snprintf(msg, sizeof msg, "ABA: free list holds %d of %d nodes after all were given back",
             count, POOL_SIZE);
    heddle_assert(count == POOL_SIZE, msg);
    return 0;
}
