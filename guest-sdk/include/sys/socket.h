/*
 * <sys/socket.h> for heddle: wasi-libc's header, plus the socket calls
 * WASI preview 1 lacks. The guest SDK compatibility library implements them
 * as failing with errno ENOSYS (saying so on stderr): the sandbox has no
 * network.
 */
#include_next <sys/socket.h>

#if defined(__wasm__) && !defined(HEDDLE_SYS_SOCKET_H)
#define HEDDLE_SYS_SOCKET_H
#ifdef __cplusplus
extern "C" {
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
