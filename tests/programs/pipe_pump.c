/*
 * pipe_pump.c — an event loop woken through a pipe, the self-pipe idiom of
 * servers and thread pools.
 *
 * A pump thread copies records from a data pipe to a socket pair (checking
 * each record's sum) and sleeps in poll() on the data pipe and a wake-up
 * pipe. main writes 3 batches of records, large enough to fill the data
 * pipe (so the writer blocks), then asks the pump to stop: it sets `stop`
 * and, to save a system call, writes to the wake-up pipe only when the pump
 * says it is sleeping. With "fixed" as the first argument main always
 * writes. The optimisation loses the wake-up when the pump checks `stop`,
 * main sets it and sees the pump not yet sleeping, and the pump then goes
 * to sleep in poll() with no timeout: a deadlock between poll() and
 * pthread_join().
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RECORD 512
#define PER_BATCH 160 /* 80 KiB a batch: more than a pipe holds */

static int data_pipe[2], wake_pipe[2], out_pair[2];
static atomic_int stop, sleeping;
static long records_seen;

static void fill(unsigned char *rec, int n) {
    unsigned sum = 0;
    for (int i = 0; i < RECORD - 4; i++) {
        rec[i] = (unsigned char)(n * 31 + i);
        sum += rec[i];
    }
    memcpy(rec + RECORD - 4, &sum, 4);
}

static int valid(const unsigned char *rec) {
    unsigned sum = 0, want;
    for (int i = 0; i < RECORD - 4; i++)
        sum += rec[i];
    memcpy(&want, rec + RECORD - 4, 4);
    return sum == want;
}

/* Reads exactly len bytes (a pipe may return fewer). */
static int read_full(int fd, unsigned char *buf, int len) {
    int got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EAGAIN)
            return got;
        if (n <= 0)
            return n < 0 ? -1 : got;
        got += n;
    }
    return got;
}

static void *pump(void *arg) {
    (void)arg;
    unsigned char rec[RECORD];
    int partial = 0;
    for (;;) {
        if (atomic_load(&stop))
            break;
        atomic_store(&sleeping, 1);
        struct pollfd fds[2] = {{data_pipe[0], POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
        int n = poll(fds, 2, -1);
        atomic_store(&sleeping, 0);
        assert(n > 0);
        if (fds[1].revents & POLLIN) {
            char c;
            assert(read(wake_pipe[0], &c, 1) == 1);
        }
        if (fds[0].revents & POLLIN) {
            int got = read_full(data_pipe[0], rec + partial, RECORD - partial);
            assert(got >= 0);
            partial += got;
            if (partial == RECORD) {
                assert(valid(rec));
                records_seen++;
                assert(write(out_pair[0], rec, 4) == 4);
                partial = 0;
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
    assert(pipe(data_pipe) == 0 && pipe(wake_pipe) == 0);
    assert(socketpair(AF_UNIX, SOCK_STREAM, 0, out_pair) == 0);
    assert(fcntl(data_pipe[0], F_SETFL, fcntl(data_pipe[0], F_GETFL) | O_NONBLOCK) == 0);
    pthread_t t;
    assert(pthread_create(&t, NULL, pump, NULL) == 0);
    unsigned char rec[RECORD];
    long sent = 0;
    for (int batch = 0; batch < 3; batch++) {
        for (int i = 0; i < PER_BATCH; i++, sent++) {
            fill(rec, (int)sent);
            assert(write(data_pipe[1], rec, RECORD) == RECORD);
        }
        /* Take the acknowledgements of this batch. */
        unsigned char ack[4 * PER_BATCH];
        int want = 4 * PER_BATCH, got = 0;
        while (got < want) {
            ssize_t n = read(out_pair[1], ack + got, want - got);
            assert(n > 0);
            got += n;
        }
    }
    atomic_store(&stop, 1);
    if (fixed || atomic_load(&sleeping))
        assert(write(wake_pipe[1], "x", 1) == 1);
    pthread_join(t, NULL);
    assert(records_seen == sent);
    close(data_pipe[1]);
    char c;
    assert(read(data_pipe[0], &c, 1) == 0); /* end of file */
    close(data_pipe[0]);
    assert(write(out_pair[1], "x", 1) == 1);
    close(out_pair[0]);
    printf("pumped %ld records\n", records_seen);
    return 0;
}
