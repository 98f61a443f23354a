/*
 * <sys/sem.h> for heddle: System V semaphores, emulated in the program's
 * own memory with a mutex and a condition variable (real synchronisation
 * the scheduler sees). Linux's constants; SEM_UNDO is accepted and has no
 * effect (no process exits while others run). The caller defines
 * `union semun`, as on Linux.
 */
#ifndef HEDDLE_SYS_SEM_H
#define HEDDLE_SYS_SEM_H
#include <sys/ipc.h>
#include <time.h>
#ifdef __cplusplus
extern "C" {
#endif

#define SEM_UNDO 0x1000
#define GETPID 11
#define GETVAL 12
#define GETALL 13
#define GETNCNT 14
#define GETZCNT 15
#define SETVAL 16
#define SETALL 17
#define SEM_STAT 18
#define SEM_INFO 19

#define SEMMSL 250
#define SEMMNI 128
#define SEMOPM 32
#define SEMVMX 32767

struct sembuf {
    unsigned short sem_num;
    short sem_op;
    short sem_flg;
};

struct semid_ds {
    struct ipc_perm sem_perm;
    time_t sem_otime;
    time_t sem_ctime;
    unsigned short sem_nsems;
};

int semget(key_t, int, int);
int semop(int, struct sembuf *, size_t);
int semtimedop(int, struct sembuf *, size_t, const struct timespec *);
int semctl(int, int, int, ...);

#ifdef __cplusplus
}
#endif
#endif
