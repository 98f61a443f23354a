/*
 * <signal.h> for heddle: wasi-libc's header, plus the POSIX signal calls it
 * hides (signal sets, masks, sigaction, kill, pthread_kill, sigwait,
 * sigsuspend, pause). The guest SDK compatibility library implements them
 * on heddle's scheduler: a signal sent to a thread is delivered at one of
 * its yield points the strategy chooses, and its handler runs on that
 * thread (docs/guide/signals.md).
 *
 * wasi-libc's sigset_t is one byte: signal n is bit (n - 1) % 8, so a set
 * holding one signal holds the signals 8, 16, ... apart from it too.
 */
#include_next <signal.h>

#if defined(__wasm__) && !defined(HEDDLE_SIGNAL_H)
#define HEDDLE_SIGNAL_H
/* sigset_t, pthread_t, pid_t and uid_t whichever feature macros the program
 * defined: wasi-libc's header declares them only without any (upstream
 * musl's types are behind a guard wasi-libc never opens). */
#define __NEED_sigset_t
#define __NEED_pthread_t
#define __NEED_pid_t
#define __NEED_uid_t
#include <bits/alltypes.h>
#ifdef __cplusplus
extern "C" {
#endif

#ifndef SIG_BLOCK
#define SIG_BLOCK 0
#define SIG_UNBLOCK 1
#define SIG_SETMASK 2
#endif

#ifndef SA_SIGINFO
#define SA_NOCLDSTOP 1
#define SA_NOCLDWAIT 2
#define SA_SIGINFO 4
#define SA_ONSTACK 0x08000000
#define SA_RESTART 0x10000000
#define SA_NODEFER 0x40000000
#define SA_RESETHAND 0x80000000
#endif

#ifndef SI_USER
#define SI_USER 0
#define SI_TKILL (-6)
#endif

#ifndef NSIG
#define NSIG _NSIG
#endif

union sigval {
    int sival_int;
    void *sival_ptr;
};

typedef struct {
    int si_signo, si_errno, si_code;
    pid_t si_pid;
    uid_t si_uid;
    void *si_addr;
    int si_status;
    union sigval si_value;
} siginfo_t;

struct sigaction {
    union {
        void (*sa_handler)(int);
        void (*sa_sigaction)(int, siginfo_t *, void *);
    } __sa_handler;
    sigset_t sa_mask;
    int sa_flags;
    void (*sa_restorer)(void);
};
#define sa_handler __sa_handler.sa_handler
#define sa_sigaction __sa_handler.sa_sigaction

int kill(pid_t, int);
int killpg(pid_t, int);
int sigemptyset(sigset_t *);
int sigfillset(sigset_t *);
int sigaddset(sigset_t *, int);
int sigdelset(sigset_t *, int);
int sigismember(const sigset_t *, int);
int sigprocmask(int, const sigset_t *__restrict, sigset_t *__restrict);
int pthread_sigmask(int, const sigset_t *__restrict, sigset_t *__restrict);
int sigsuspend(const sigset_t *);
int sigaction(int, const struct sigaction *__restrict, struct sigaction *__restrict);
int sigpending(sigset_t *);
int sigwait(const sigset_t *__restrict, int *__restrict);
int pthread_kill(pthread_t, int);
int pause(void);

/* signal() and raise() are the SDK's, which deliver (wasi-libc's
 * headers declare them, and a library of the toolchain defines others).
 * alarm() belongs to <unistd.h>, which declares it too. */
#ifndef HEDDLE_COMPAT_LIBRARY
void (*signal(int, void (*)(int)))(int) __asm__("__heddle_signal");
int raise(int) __asm__("__heddle_raise");
#endif
unsigned alarm(unsigned);

#ifdef __cplusplus
}
#endif
#endif
