/*
 * names.c — functions with one-letter names, a static function and an
 * inlined one: `heddle sites` and reports must name each as written.
 */
#include <pthread.h>

int shared;

__attribute__((noinline)) void f(void) { shared += 1; }
__attribute__((noinline)) void g(void) { shared += 2; }
__attribute__((noinline)) static void w(void) { shared += 3; }
__attribute__((noinline)) void x(void) { w(); shared += 4; }
static inline __attribute__((always_inline)) void bump_inlined(void) { shared += 5; }

static void *worker(void *arg) {
    f();
    g();
    x();
    bump_inlined();
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    f();
    pthread_join(t, 0);
    return 0;
}
