/*
 * <sys/ipc.h> for heddle: the System V IPC constants (Linux's values) for
 * the in-process semaphores of <sys/sem.h>.
 */
#ifndef HEDDLE_SYS_IPC_H
#define HEDDLE_SYS_IPC_H
#include <sys/types.h>
#define __NEED_key_t
#include <bits/alltypes.h>
#ifdef __cplusplus
extern "C" {
#endif

struct ipc_perm {
    key_t __key;
    uid_t uid;
    gid_t gid;
    uid_t cuid;
    gid_t cgid;
    mode_t mode;
    int __seq;
};

#define IPC_PRIVATE ((key_t)0)
#define IPC_CREAT 01000
#define IPC_EXCL 02000
#define IPC_NOWAIT 04000
#define IPC_RMID 0
#define IPC_SET 1
#define IPC_STAT 2
#define IPC_INFO 3

key_t ftok(const char *, int);

#ifdef __cplusplus
}
#endif
#endif
