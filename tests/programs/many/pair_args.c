/*
 * pair_args.c — setters that write different values, each field under the
 * lock on its own, and a checker created in the middle of the pool.
 *
 * Thread i gets a struct with its index and role. Setter i stores
 * pos.x = i + 1 and then pos.y = -(i + 1), each in its own critical
 * section; the checker, one of the pool, reads the pair through
 * read_pos() and asserts x + y == 0.
 *
 * Bug: the checker reads between a setter's two critical sections and sees
 *      the x of one setter with the y of another (or the initial 0).
 *
 * -DFIXED: a setter stores both fields in one critical section.
 *
 * Args: [threads] (default 50; the checker is thread threads / 2)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX 200

enum role { SETTER, CHECKER };

struct targ {
    int id;
    enum role role;
};

struct point {
    int x;
    int y;
};

static struct point pos;
static pthread_mutex_t pos_lock = PTHREAD_MUTEX_INITIALIZER;

static void store_x(int v) {
    pthread_mutex_lock(&pos_lock);
    pos.x = v;
#ifndef FIXED
    pthread_mutex_unlock(&pos_lock);
#endif
}

static void store_y(int v) {
#ifndef FIXED
    pthread_mutex_lock(&pos_lock);
#endif
    pos.y = v;
    pthread_mutex_unlock(&pos_lock);
}

static struct point read_pos(void) {
    pthread_mutex_lock(&pos_lock);
    struct point p = pos;
    pthread_mutex_unlock(&pos_lock);
    return p;
}

static void *worker(void *arg) {
    struct targ *t = arg;
    if (t->role == SETTER) {
        store_x(t->id + 1);
        store_y(-(t->id + 1));
    } else {
        struct point p = read_pos();
        assert(p.x + p.y == 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50;
    if (n < 2 || n > MAX)
        return 2;
    pthread_t th[MAX];
    struct targ args[MAX];
    for (int i = 0; i < n; i++) {
        args[i].id = i;
        args[i].role = i == n / 2 ? CHECKER : SETTER;
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    printf("pos = (%d, %d)\n", pos.x, pos.y);
    return 0;
}
