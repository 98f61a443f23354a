/*
 * <unistd.h> for heddle: wasi-libc's header, plus the user and group ids
 * WASI hides. The guest SDK compatibility library answers them with one
 * fixed user: uid and gid 1000 (see docs/guide/projects.md), and sends
 * SIGALRM for alarm() on heddle's virtual clock (docs/guide/signals.md),
 * and pipe()/pipe2(), channels inside the run that heddle answers.
 */
#include_next <unistd.h>

#if defined(__wasm__) && !defined(HEDDLE_UNISTD_H)
#define HEDDLE_UNISTD_H
#ifdef __cplusplus
extern "C" {
#endif

uid_t getuid(void);
uid_t geteuid(void);
gid_t getgid(void);
gid_t getegid(void);
int getgroups(int, gid_t[]);
int setuid(uid_t);
int seteuid(uid_t);
int setgid(gid_t);
int setegid(gid_t);
unsigned alarm(unsigned);
int pause(void);
int pipe(int[2]);
int pipe2(int[2], int);

#ifdef __cplusplus
}
#endif
#endif
