// sjlj_recovery.c — setjmp/longjmp under heddle (LLVM's lowering over wasm
// exception handling, with the guest SDK's runtime): error recovery inside
// worker threads.
//
// Each worker evaluates expressions with a recursive-descent parser whose
// errors longjmp, from however deep the parser is, back to the worker's
// setjmp; a nested setjmp in `checked_div` turns a division by zero into an
// error of the outer one. Workers record results and errors under a mutex;
// main checks the totals after the joins.
//
// -DSTALE_LONGJMP: main longjmps to a jmp_buf whose setjmp's function has
//      returned: the run fails (`longjmp to the jmp_buf at …, whose setjmp
//      is no longer active`).
//
// Output: `ok 3, errors 3 (of 6)`.
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "heddle.h"

struct parser {
    const char *p;
    jmp_buf on_error;
    const char *error;
};

static void fail(struct parser *ps, const char *why) {
    ps->error = why;
    longjmp(ps->on_error, 1);
}

static int expr(struct parser *ps);

static int checked_div(struct parser *ps, int a, int b) {
    jmp_buf saved;
    memcpy(saved, ps->on_error, sizeof saved);
    if (setjmp(ps->on_error) == 0) {
        if (b == 0)
            fail(ps, "division by zero");
        memcpy(ps->on_error, saved, sizeof saved);
        return a / b;
    }
    // Caught here first: pass it on to the outer handler.
    memcpy(ps->on_error, saved, sizeof saved);
    fail(ps, ps->error);
    return 0;
}

static int atom(struct parser *ps) {
    if (*ps->p == '(') {
        ps->p++;
        int v = expr(ps);
        if (*ps->p != ')')
            fail(ps, "missing )");
        ps->p++;
        return v;
    }
    if (*ps->p < '0' || *ps->p > '9')
        fail(ps, "expected a digit");
    int v = 0;
    while (*ps->p >= '0' && *ps->p <= '9')
        v = v * 10 + (*ps->p++ - '0');
    return v;
}

static int term(struct parser *ps) {
    int v = atom(ps);
    while (*ps->p == '*' || *ps->p == '/') {
        char op = *ps->p++;
        int w = atom(ps);
        v = op == '*' ? v * w : checked_div(ps, v, w);
    }
    return v;
}

static int expr(struct parser *ps) {
    int v = term(ps);
    while (*ps->p == '+' || *ps->p == '-') {
        char op = *ps->p++;
        int w = term(ps);
        v = op == '+' ? v + w : v - w;
    }
    return v;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ok, errors, sum;

static const char *inputs[2][3] = {
    {"1+2*(3+4)", "8/(2-2)", "(1+2"},
    {"((6))/3", "7*", "10-3-2"},
};

static void *worker(void *arg) {
    const char **mine = arg;
    for (int i = 0; i < 3; i++) {
        struct parser ps = {.p = mine[i]};
        volatile int attempts = 0;
        if (setjmp(ps.on_error) == 0) {
            attempts++;
            int v = expr(&ps);
            if (*ps.p != '\0')
                fail(&ps, "trailing input");
            pthread_mutex_lock(&lock);
            ok++;
            sum += v;
            pthread_mutex_unlock(&lock);
        } else {
            heddle_assert(attempts == 1, "setjmp returned twice before the longjmp");
            pthread_mutex_lock(&lock);
            errors++;
            pthread_mutex_unlock(&lock);
        }
    }
    return NULL;
}

#ifdef STALE_LONGJMP
static jmp_buf stale;

static __attribute__((noinline)) int arm(void) { return setjmp(stale); }
#endif

int main(void) {
#ifdef STALE_LONGJMP
    if (arm() == 0)
        longjmp(stale, 1);
#endif
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)inputs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    heddle_assert(ok == 3 && errors == 3, "every expression is either a value or an error");
    heddle_assert(sum == 15 + 2 + 5, "the values");
    printf("ok %d, errors %d (of 6)\n", ok, errors);
    return 0;
}
