/*
 * tc_posix_stubs.c — ordinary server-ish start-up code: block signals in
 * every thread, install a handler, resolve a host, open a socket, load a
 * plugin. It builds and runs under heddle: signal sets, masks and handlers
 * work, the rest fails with ENOSYS and the run's stderr names each call.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void on_term(int sig) { (void)sig; }

static void *worker(void *arg) {
    sigset_t mine;
    pthread_sigmask(SIG_SETMASK, 0, &mine);
    *(int *)arg = sigismember(&mine, SIGTERM);
    return 0;
}

int main(void) {
    sigset_t all, old;
    sigfillset(&all);
    sigemptyset(&old);
    sigaddset(&old, SIGINT);
    if (!sigismember(&old, SIGINT) || pthread_sigmask(SIG_BLOCK, &all, &old) != 0)
        return 10;
    int blocked = -1;
    pthread_t t;
    pthread_create(&t, 0, worker, &blocked);
    pthread_join(t, 0);
    printf("sigmask ok\n");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    int ign = sigaction(SIGPIPE, &sa, 0);
    sa.sa_handler = on_term;
    int r = sigaction(SIGTERM, &sa, 0);
    printf("sigaction ign %d handler %d %s\n", ign, r, r ? strerror(errno) : "");

    struct addrinfo hints, *res = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo("localhost", "80", &hints, &res);
    printf("getaddrinfo %s errno %s\n", g == EAI_SYSTEM ? "EAI_SYSTEM" : gai_strerror(g),
           strerror(errno));

    errno = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    printf("socket %d %s\n", fd, strerror(errno));

    void *h = dlopen("libplugin.so", RTLD_NOW);
    printf("dlopen %s: %s\n", h ? "loaded" : "null", dlerror());
    return 0;
}
