/*
 * heddle guest SDK compatibility library.
 *
 * The threads build of wasi-libc lacks a few calls that ordinary test
 * programs use. `heddle cc` links this library into every module (as an
 * archive, so a program's own definition of any of these wins). Everything
 * here is deterministic under heddle: clocks read heddle's virtual clock.
 *
 * Compiled with -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_SIGNAL
 * -D_WASI_EMULATED_GETPID so the corresponding declarations are visible.
 * The POSIX calls the sandbox cannot fully serve (signals, sockets, name
 * resolution, dynamic loading) are in their own files (one object each, so
 * a program that defines one of them itself still links).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

/* ---- memory ------------------------------------------------------------ */

void *memalign(size_t alignment, size_t size) {
    void *p = 0;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    return posix_memalign(&p, alignment, size) == 0 ? p : 0;
}

void *valloc(size_t size) { return memalign(65536, size); }

/* ---- err/warn family (BSD <err.h>) ------------------------------------ */

extern char *__progname;

static void vreport(int with_errno, int saved, const char *fmt, va_list ap) {
    fprintf(stderr, "%s: ", __progname && *__progname ? __progname : "target");
    if (fmt) {
        vfprintf(stderr, fmt, ap);
        if (with_errno)
            fputs(": ", stderr);
    }
    if (with_errno)
        fputs(strerror(saved), stderr);
    fputc('\n', stderr);
}

void vwarn(const char *fmt, va_list ap) { vreport(1, errno, fmt, ap); }
void vwarnx(const char *fmt, va_list ap) { vreport(0, 0, fmt, ap); }
_Noreturn void verr(int status, const char *fmt, va_list ap) {
    vreport(1, errno, fmt, ap);
    exit(status);
}
_Noreturn void verrx(int status, const char *fmt, va_list ap) {
    vreport(0, 0, fmt, ap);
    exit(status);
}
void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}
void warnx(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarnx(fmt, ap);
    va_end(ap);
}
_Noreturn void err(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verr(status, fmt, ap);
}
_Noreturn void errx(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verrx(status, fmt, ap);
}

/* ---- process clocks: virtual monotonic time since start ---------------- */

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long start_ns = -1;

static long long elapsed_ns(void) {
    long long now = mono_ns();
    if (start_ns < 0)
        start_ns = now;
    return now - start_ns;
}

clock_t clock(void) { return (clock_t)(elapsed_ns() / (1000000000LL / CLOCKS_PER_SEC)); }

clock_t times(struct tms *buf) {
    clock_t ticks = (clock_t)(elapsed_ns() / 10000000LL); /* 100 Hz */
    if (buf) {
        buf->tms_utime = ticks;
        buf->tms_stime = 0;
        buf->tms_cutime = 0;
        buf->tms_cstime = 0;
    }
    return ticks;
}

int getrusage(int who, struct rusage *usage) {
    (void)who;
    long long ns = elapsed_ns();
    memset(usage, 0, sizeof *usage);
    usage->ru_utime.tv_sec = ns / 1000000000LL;
    usage->ru_utime.tv_usec = (ns % 1000000000LL) / 1000;
    return 0;
}

/* ---- process identity and signals --------------------------------------- */

pid_t getpid(void) { return 1; }

/* With _WASI_EMULATED_SIGNAL the headers define SIG_IGN and SIG_ERR as
 * these functions' addresses. */
void __SIG_IGN(int sig) { (void)sig; }
void __SIG_ERR(int sig) {
    (void)sig;
    __builtin_trap();
}

void (*signal(int sig, void (*handler)(int)))(int) {
    (void)sig;
    (void)handler;
    return SIG_DFL;
}

int raise(int sig) {
    switch (sig) {
    case SIGABRT:
        abort();
    case SIGKILL:
    case SIGTERM:
    case SIGINT:
    case SIGQUIT:
        _Exit(128 + sig);
    default:
        return 0;
    }
}

/* The SDK's alarm (signals.c), for a file that declares alarm() through
 * <unistd.h> alone. */
unsigned __heddle_alarm(unsigned seconds);
unsigned alarm(unsigned seconds) { return __heddle_alarm(seconds); }

/* ---- pthread_exit --------------------------------------------------------
 * The threads wasi-libc cannot unwind a thread's stack, so it has no
 * pthread_exit. Under heddle the host does the unwinding: this import ends the
 * calling thread's guest frames up to its start routine, which then returns
 * `retval` to wasi-libc's thread epilogue (TSD destructors, join wake-up), as
 * if the start routine had returned it. */
__attribute__((import_module("heddle"), import_name("thread_exit"), noreturn))
void __heddle_thread_exit(void *retval);

void pthread_exit(void *retval) { __heddle_thread_exit(retval); }

