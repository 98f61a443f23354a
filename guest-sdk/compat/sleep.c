/*
 * heddle guest SDK: sleeping as Linux sleeps. wasi-libc's clock_nanosleep
 * answers every failed poll with ENOTSUP and never reports the time left;
 * under heddle a sleep cut short by a signal handler is EINTR with the
 * remaining time, so `while (nanosleep(&t, &t) == -1 && errno == EINTR);`
 * sleeps exactly as long as asked and sleep() returns the seconds left.
 * These definitions come before wasi-libc's in every link.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <wasi/api.h>

static const uint64_t NS = 1000000000ull;

static uint64_t monotonic_ns(void) {
    __wasi_timestamp_t t = 0;
    if (__wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 1, &t) != 0)
        return 0;
    return t;
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    __wasi_clockid_t id;
    if (clock == CLOCK_REALTIME)
        id = __WASI_CLOCKID_REALTIME;
    else if (clock == CLOCK_MONOTONIC)
        id = __WASI_CLOCKID_MONOTONIC;
    else
        return EINVAL;
    if ((flags & ~TIMER_ABSTIME) != 0 || req->tv_nsec < 0 || req->tv_nsec >= (long)NS)
        return EINVAL;
    int absolute = (flags & TIMER_ABSTIME) != 0;
    if (req->tv_sec < 0)
        return absolute ? 0 : EINVAL;
    uint64_t ns = (uint64_t)req->tv_sec > (UINT64_MAX - NS) / NS
                      ? UINT64_MAX
                      : (uint64_t)req->tv_sec * NS + (uint64_t)req->tv_nsec;
    uint64_t start = absolute ? 0 : monotonic_ns();
    __wasi_subscription_t sub = {
        .userdata = 0,
        .u = {.tag = __WASI_EVENTTYPE_CLOCK,
              .u = {.clock = {.id = id,
                              .timeout = ns,
                              .precision = 0,
                              .flags = absolute ? __WASI_SUBCLOCKFLAGS_SUBSCRIPTION_CLOCK_ABSTIME
                                                : 0}}},
    };
    __wasi_event_t ev;
    __wasi_size_t n = 0;
    __wasi_errno_t error = __wasi_poll_oneoff(&sub, &ev, 1, &n);
    if (error == __WASI_ERRNO_INTR) {
        if (rem && !absolute) {
            uint64_t slept = monotonic_ns() - start;
            uint64_t left = slept < ns ? ns - slept : 0;
            rem->tv_sec = (time_t)(left / NS);
            rem->tv_nsec = (long)(left % NS);
        }
        return EINTR;
    }
    if (error != 0 || (n == 1 && ev.error != 0))
        return EINVAL;
    return 0;
}

int nanosleep(const struct timespec *req, struct timespec *rem) {
    int error = clock_nanosleep(CLOCK_REALTIME, 0, req, rem);
    if (error != 0) {
        errno = error;
        return -1;
    }
    return 0;
}

/* The seconds left, rounded to the nearest as glibc rounds them. */
unsigned sleep(unsigned seconds) {
    struct timespec t = {(time_t)seconds, 0};
    if (nanosleep(&t, &t) == -1)
        return (unsigned)t.tv_sec + (t.tv_nsec >= 500000000L);
    return 0;
}

int usleep(useconds_t us) {
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    return nanosleep(&t, NULL);
}
