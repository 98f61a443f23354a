/*
 * pipe_corners.c — what Linux code expects of pipes and socket pairs:
 * blocking reads and end of file, a writer blocked on a full pipe, EAGAIN
 * with O_NONBLOCK, EPIPE with SIGPIPE ignored, poll() and select() with
 * timeouts on the virtual clock, shutdown(), fstat(), and a buffer handed
 * to another thread through a pipe with no lock (the pipe orders it: no
 * data race).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int hand[2];
static char shared[256];

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < (int)sizeof shared; i++)
        shared[i] = (char)i;
    /* Publishes `shared`: the reader's read of the byte orders its reads. */
    assert(write(hand[1], "!", 1) == 1);
    /* Then a lot more than a pipe holds: the writer blocks until read. */
    static char big[200000];
    memset(big, 'b', sizeof big);
    assert(write(hand[1], big, sizeof big) == (ssize_t)sizeof big);
    close(hand[1]);
    return NULL;
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(void) {
    assert(pipe(hand) == 0);
    struct stat st;
    assert(fstat(hand[0], &st) == 0);
    pthread_t t;
    assert(pthread_create(&t, NULL, producer, NULL) == 0);
    char c;
    assert(read(hand[0], &c, 1) == 1 && c == '!');
    for (int i = 0; i < (int)sizeof shared; i++)
        assert(shared[i] == (char)i);
    long total = 0;
    char buf[8192];
    ssize_t n;
    while ((n = read(hand[0], buf, sizeof buf)) > 0)
        total += n;
    assert(n == 0 && total == 200000);
    pthread_join(t, NULL);
    close(hand[0]);

    /* O_NONBLOCK. */
    int p[2];
    assert(pipe2(p, O_NONBLOCK) == 0);
    assert(read(p[0], &c, 1) == -1 && errno == EAGAIN);
    assert(fcntl(p[1], F_GETFL) & O_NONBLOCK);
    static char fill[70000];
    assert(write(p[1], fill, sizeof fill) == 65536);
    assert(write(p[1], fill, 1) == -1 && errno == EAGAIN);
    struct pollfd pf = {p[1], POLLOUT, 0};
    assert(poll(&pf, 1, 0) == 0);
    pf.fd = p[0];
    pf.events = POLLIN;
    assert(poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN));

    /* A reader gone: EPIPE, with SIGPIPE ignored. */
    signal(SIGPIPE, SIG_IGN);
    close(p[0]);
    assert(write(p[1], "x", 1) == -1 && errno == EPIPE);
    close(p[1]);

    /* A poll timeout passes on the virtual clock. */
    int q[2];
    assert(pipe(q) == 0);
    long before = now_ms();
    pf.fd = q[0];
    pf.events = POLLIN;
    assert(poll(&pf, 1, 250) == 0);
    assert(now_ms() - before >= 250);
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(q[0], &rd);
    struct timeval tv = {0, 100000};
    assert(select(q[0] + 1, &rd, NULL, NULL, &tv) == 0);
    assert(write(q[1], "y", 1) == 1);
    FD_SET(q[0], &rd);
    assert(select(q[0] + 1, &rd, NULL, NULL, NULL) == 1 && FD_ISSET(q[0], &rd));
    /* The writer closes: end of file, and poll says so. */
    close(q[1]);
    assert(read(q[0], &c, 1) == 1 && c == 'y');
    assert(poll(&pf, 1, -1) == 1 && (pf.revents & POLLHUP));
    assert(read(q[0], &c, 1) == 0);
    close(q[0]);

    /* A socket pair: both ways, then one way shut. */
    int s[2];
    assert(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0);
    assert(fstat(s[0], &st) == 0 && S_ISSOCK(st.st_mode));
    assert(send(s[0], "ping", 4, 0) == 4 && write(s[1], "pong", 4) == 4);
    char got[8] = {0};
    assert(recv(s[1], got, 2, MSG_PEEK) == 2 && recv(s[1], got, 8, 0) == 4);
    assert(memcmp(got, "ping", 4) == 0);
    assert(read(s[0], got, 8) == 4 && memcmp(got, "pong", 4) == 0);
    assert(shutdown(s[0], SHUT_WR) == 0);
    assert(recv(s[1], got, 8, 0) == 0);
    assert(send(s[1], "late", 4, 0) == 4 && read(s[0], got, 8) == 4);
    close(s[0]);
    close(s[1]);
    assert(socketpair(AF_INET, SOCK_STREAM, 0, s) == -1 && errno == EOPNOTSUPP);
    puts("pipe corners: ok");
    return 0;
}
