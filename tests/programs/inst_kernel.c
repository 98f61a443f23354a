/* An access-heavy single-threaded kernel for benches/instrument.rs: a
 * recurrence over two global arrays, about 3 plain accesses per element
 * (4 at -O0), argv[1] rounds over 4096 elements (default 100: ~1.2 million
 * accesses at -O1). Prints a checksum so the work cannot be optimised away,
 * and on stderr the wall time of the rounds alone (`kernel_ns N`), so that a
 * measurement can leave out instantiation and start-up. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096

static unsigned a[N];
static unsigned b[N];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    for (int i = 0; i < N; i++)
        b[i] = (unsigned)i * 2654435761u;
    long long start = now_ns();
    for (int r = 0; r < rounds; r++) {
        for (int i = 1; i < N; i++) {
            a[i] = a[i - 1] * 31u + (b[i] ^ (unsigned)r);
            b[i] = a[i] >> 3;
        }
    }
    long long elapsed = now_ns() - start;
    unsigned sum = 0;
    for (int i = 0; i < N; i++)
        sum += a[i] ^ b[i];
    printf("checksum %u\n", sum);
    fprintf(stderr, "kernel_ns %lld\n", elapsed);
    return 0;
}
