/*
 * heddle guest SDK: pipes, socket pairs, sockets and name resolution
 * (declared by the SDK's <unistd.h>, <sys/socket.h> and <netdb.h>). Pipes
 * and AF_UNIX stream socket pairs are channels inside the run, answered by
 * heddle (reads, writes, poll and close go through wasi-libc to heddle's
 * WASI calls). The sandbox has no network: the other socket calls fail
 * with ENOSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>

#include "unsupported.h"

/* ---- pipes and socket pairs: channels inside the run ------------------- */

__attribute__((import_module("heddle"), import_name("pipe")))
int __heddle_pipe(int *fds, int flags);
__attribute__((import_module("heddle"), import_name("socketpair")))
int __heddle_socketpair(int *fds, int flags);

int pipe2(int fds[2], int flags) {
    if (flags & ~(O_NONBLOCK | O_CLOEXEC)) {
        errno = EINVAL;
        return -1;
    }
    int err = __heddle_pipe(fds, (flags & O_NONBLOCK) ? 1 : 0);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int pipe(int fds[2]) { return pipe2(fds, 0); }

int socketpair(int domain, int type, int protocol, int fds[2]) {
    int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (domain != AF_UNIX) {
        /* Linux: an IP socket pair is not supported, other families are. */
        errno = (domain == AF_INET || domain == AF_INET6) ? EOPNOTSUPP : EAFNOSUPPORT;
        return -1;
    }
    if (kind != SOCK_STREAM || protocol != 0) {
        errno = EPROTONOSUPPORT;
        return -1;
    }
    int err = __heddle_socketpair(fds, (type & SOCK_NONBLOCK) ? 1 : 0);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* ---- sockets and name resolution: no network in the sandbox ------------ */

int socket(int domain, int type, int protocol) {
    (void)domain;
    (void)type;
    (void)protocol;
    ENOSYS_CALL("socket");
    return -1;
}
int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    (void)fd;
    (void)addr;
    (void)len;
    ENOSYS_CALL("connect");
    return -1;
}
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    (void)fd;
    (void)addr;
    (void)len;
    ENOSYS_CALL("bind");
    return -1;
}
int listen(int fd, int backlog) {
    (void)fd;
    (void)backlog;
    ENOSYS_CALL("listen");
    return -1;
}
int getsockname(int fd, struct sockaddr *restrict addr, socklen_t *restrict len) {
    (void)fd;
    (void)addr;
    (void)len;
    ENOSYS_CALL("getsockname");
    return -1;
}
int getpeername(int fd, struct sockaddr *restrict addr, socklen_t *restrict len) {
    (void)fd;
    (void)addr;
    (void)len;
    ENOSYS_CALL("getpeername");
    return -1;
}
ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
               socklen_t len) {
    (void)fd;
    (void)buf;
    (void)n;
    (void)flags;
    (void)addr;
    (void)len;
    ENOSYS_CALL("sendto");
    return -1;
}
ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags, struct sockaddr *restrict addr,
                 socklen_t *restrict len) {
    (void)fd;
    (void)buf;
    (void)n;
    (void)flags;
    (void)addr;
    (void)len;
    ENOSYS_CALL("recvfrom");
    return -1;
}
ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    (void)fd;
    (void)msg;
    (void)flags;
    ENOSYS_CALL("sendmsg");
    return -1;
}
ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
    (void)fd;
    (void)msg;
    (void)flags;
    ENOSYS_CALL("recvmsg");
    return -1;
}
int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
    (void)fd;
    (void)level;
    (void)name;
    (void)val;
    (void)len;
    ENOSYS_CALL("setsockopt");
    return -1;
}

int getaddrinfo(const char *restrict node, const char *restrict service,
                const struct addrinfo *restrict hints, struct addrinfo **restrict res) {
    (void)node;
    (void)service;
    (void)hints;
    *res = 0;
    ENOSYS_CALL("getaddrinfo");
    return EAI_SYSTEM;
}
void freeaddrinfo(struct addrinfo *ai) { (void)ai; }
int getnameinfo(const struct sockaddr *restrict sa, socklen_t salen, char *restrict host,
                socklen_t hostlen, char *restrict serv, socklen_t servlen, int flags) {
    (void)sa;
    (void)salen;
    (void)host;
    (void)hostlen;
    (void)serv;
    (void)servlen;
    (void)flags;
    ENOSYS_CALL("getnameinfo");
    return EAI_SYSTEM;
}
const char *gai_strerror(int code) {
    switch (code) {
    case EAI_SYSTEM:
        return "System error";
    case EAI_NONAME:
        return "Name does not resolve";
    case EAI_AGAIN:
        return "Temporary failure in name resolution";
    case EAI_FAIL:
        return "Non-recoverable failure in name resolution";
    case EAI_MEMORY:
        return "Out of memory";
    default:
        return "Unknown error";
    }
}

static _Thread_local int h_errno_value;
int *__h_errno_location(void) { return &h_errno_value; }
const char *hstrerror(int code) {
    return code == NO_RECOVERY ? "Unrecoverable error" : "Unknown resolver error";
}
struct hostent *gethostbyname(const char *name) {
    (void)name;
    ENOSYS_CALL("gethostbyname");
    h_errno = NO_RECOVERY;
    return 0;
}
struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type) {
    (void)addr;
    (void)len;
    (void)type;
    ENOSYS_CALL("gethostbyaddr");
    h_errno = NO_RECOVERY;
    return 0;
}
struct servent *getservbyname(const char *name, const char *proto) {
    (void)name;
    (void)proto;
    ENOSYS_CALL("getservbyname");
    return 0;
}
struct protoent *getprotobyname(const char *name) {
    (void)name;
    ENOSYS_CALL("getprotobyname");
    return 0;
}
