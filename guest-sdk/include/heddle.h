/*
 * heddle.h — the guest side of heddle.
 *
 * A target includes this header to talk to the heddle scheduler. Under heddle
 * (compiled with `heddle cc`, target wasm32-wasip1-threads) each function is an
 * import from the host module "heddle". Built natively (gcc/clang for the host),
 * each one falls back to plain behaviour, so the same test program also builds
 * and runs as an ordinary pthread program:
 *
 *   function               under heddle                         natively
 *   heddle_assert(c, msg)  verdict `assertion` with msg + site  abort() with msg
 *   heddle_fail(msg)       verdict `assertion` with msg + site  abort() with msg
 *   heddle_yield()         an explicit yield point              sched_yield()
 *   heddle_event(name)     a named event plans can refer to     nothing
 *   heddle_thread_name(n)  names the calling thread in reports  nothing
 *   heddle_choose(n)       a controlled choice in [0, n),       rand() % n
 *                          recorded in the schedule
 *
 * All strings must be NUL-terminated and stay valid for the duration of the call.
 */
#ifndef HEDDLE_H
#define HEDDLE_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__wasm__) && !defined(HEDDLE_NATIVE)

#define HEDDLE_IMPORT(name) __attribute__((import_module("heddle"), import_name(name)))

HEDDLE_IMPORT("assert") void heddle_assert(int cond, const char *msg);
HEDDLE_IMPORT("fail") void heddle_fail(const char *msg);
HEDDLE_IMPORT("yield") void heddle_yield(void);
HEDDLE_IMPORT("event") void heddle_event(const char *name);
HEDDLE_IMPORT("thread_name") void heddle_thread_name(const char *name);
HEDDLE_IMPORT("choose") unsigned heddle_choose(unsigned n);

#undef HEDDLE_IMPORT

/* Non-zero when the program runs under heddle. */
#define HEDDLE_ACTIVE 1

#else /* native build: plain behaviour */

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static inline void heddle_assert(int cond, const char *msg) {
    if (!cond) {
        fprintf(stderr, "heddle_assert failed: %s\n", msg);
        abort();
    }
}
static inline void heddle_fail(const char *msg) {
    fprintf(stderr, "heddle_fail: %s\n", msg);
    abort();
}
static inline void heddle_yield(void) { sched_yield(); }
static inline void heddle_event(const char *name) { (void)name; }
static inline void heddle_thread_name(const char *name) { (void)name; }
static inline unsigned heddle_choose(unsigned n) { return n ? (unsigned)rand() % n : 0; }

#define HEDDLE_ACTIVE 0

#endif

#define HEDDLE_STR2(x) #x
#define HEDDLE_STR(x) HEDDLE_STR2(x)

/* HEDDLE_ASSERT(cond): heddle_assert with the condition text and location as the message. */
#define HEDDLE_ASSERT(cond) \
    heddle_assert(!!(cond), #cond " (" __FILE__ ":" HEDDLE_STR(__LINE__) ")")

#ifdef __cplusplus
}
#endif

#endif /* HEDDLE_H */
