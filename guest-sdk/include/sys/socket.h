/*
 * <sys/socket.h> for heddle: wasi-libc's header, plus the socket calls
 * WASI preview 1 lacks. The guest SDK compatibility library implements them
 * as failing with errno ENOSYS (saying so on stderr): the sandbox has no
 * network. The socket options, levels and message flags WASI preview 1
 * leaves out are Linux's values; address families keep wasi-libc's numbers
 * (AF_INET 1, AF_INET6 2, AF_UNIX 3), which its inet_pton and inet_ntop
 * expect, and PF_UNIX/PF_LOCAL/AF_LOCAL name AF_UNIX.
 */
#include_next <sys/socket.h>

#if defined(__wasm__) && !defined(HEDDLE_SYS_SOCKET_H)
#define HEDDLE_SYS_SOCKET_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef SO_DEBUG
#define SO_DEBUG 1
#endif
#ifndef SO_REUSEADDR
#define SO_REUSEADDR 2
#endif
#ifndef SO_ERROR
#define SO_ERROR 4
#endif
#ifndef SO_DONTROUTE
#define SO_DONTROUTE 5
#endif
#ifndef SO_BROADCAST
#define SO_BROADCAST 6
#endif
#ifndef SO_SNDBUF
#define SO_SNDBUF 7
#endif
#ifndef SO_RCVBUF
#define SO_RCVBUF 8
#endif
#ifndef SO_KEEPALIVE
#define SO_KEEPALIVE 9
#endif
#ifndef SO_OOBINLINE
#define SO_OOBINLINE 10
#endif
#ifndef SO_LINGER
#define SO_LINGER 13
#endif
#ifndef SO_REUSEPORT
#define SO_REUSEPORT 15
#endif
#ifndef SO_RCVLOWAT
#define SO_RCVLOWAT 18
#define SO_SNDLOWAT 19
#endif
#ifndef SO_RCVTIMEO
#define SO_RCVTIMEO 66
#define SO_SNDTIMEO 67
#endif
#ifndef SO_ACCEPTCONN
#define SO_ACCEPTCONN 30
#endif
#ifndef SO_PROTOCOL
#define SO_PROTOCOL 38
#define SO_DOMAIN 39
#endif
#ifndef SOL_IP
#define SOL_IP 0
#define SOL_TCP 6
#define SOL_UDP 17
#define SOL_IPV6 41
#endif
#ifndef SOMAXCONN
#define SOMAXCONN 128
#endif
#ifndef MSG_OOB
#define MSG_OOB 0x0001
#endif
#ifndef MSG_DONTROUTE
#define MSG_DONTROUTE 0x0004
#endif
#ifndef MSG_DONTWAIT
#define MSG_DONTWAIT 0x0040
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0x4000
#endif
#ifndef PF_LOCAL
#define PF_LOCAL AF_UNIX
#endif
#ifndef PF_UNIX
#define PF_UNIX AF_UNIX
#endif
#ifndef PF_FILE
#define PF_FILE AF_UNIX
#endif
#ifndef AF_LOCAL
#define AF_LOCAL AF_UNIX
#endif
#ifndef AF_FILE
#define AF_FILE AF_UNIX
#endif

int socket(int, int, int);
int socketpair(int, int, int, int[2]);
int connect(int, const struct sockaddr *, socklen_t);
int bind(int, const struct sockaddr *, socklen_t);
int listen(int, int);
int getsockname(int, struct sockaddr *__restrict, socklen_t *__restrict);
int getpeername(int, struct sockaddr *__restrict, socklen_t *__restrict);
ssize_t sendto(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
ssize_t recvfrom(int, void *__restrict, size_t, int, struct sockaddr *__restrict,
                 socklen_t *__restrict);
ssize_t sendmsg(int, const struct msghdr *, int);
ssize_t recvmsg(int, struct msghdr *, int);
int setsockopt(int, int, int, const void *, socklen_t);

#ifdef __cplusplus
}
#endif
#endif
