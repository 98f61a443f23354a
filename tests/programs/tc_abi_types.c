/*
 * tc_abi_types.c — one global of each libc type whose layout the headers
 * (Debian trixie's wasi-libc) and libc.a (rustup's wasi-libc) must agree on.
 * Globals force each type's DWARF to be emitted in this compile unit; the
 * program also calls into libc with every one so the libc objects that
 * define them are linked (and their DWARF comes along).
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

pthread_mutex_t tc_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t tc_cond = PTHREAD_COND_INITIALIZER;
pthread_attr_t tc_attr;
pthread_rwlock_t tc_rwlock = PTHREAD_RWLOCK_INITIALIZER;
pthread_barrier_t tc_barrier;
pthread_mutexattr_t tc_mutexattr;
pthread_condattr_t tc_condattr;
pthread_key_t tc_key;
pthread_once_t tc_once = PTHREAD_ONCE_INIT;
sem_t tc_sem;
struct timespec tc_timespec;
FILE *tc_file;
off_t tc_off;
time_t tc_time;
size_t tc_size;

static void *worker(void *arg) { return arg; }

int main(void) {
    pthread_t t;
    pthread_attr_init(&tc_attr);
    pthread_attr_setstacksize(&tc_attr, 65536);
    pthread_create(&t, &tc_attr, worker, 0);
    pthread_join(t, 0);
    pthread_attr_destroy(&tc_attr);

    pthread_mutexattr_init(&tc_mutexattr);
    pthread_condattr_init(&tc_condattr);
    pthread_mutex_lock(&tc_mutex);
    clock_gettime(CLOCK_REALTIME, &tc_timespec);
    tc_timespec.tv_sec += 1;
    pthread_cond_timedwait(&tc_cond, &tc_mutex, &tc_timespec);
    pthread_mutex_unlock(&tc_mutex);
    pthread_rwlock_rdlock(&tc_rwlock);
    pthread_rwlock_unlock(&tc_rwlock);
    pthread_barrier_init(&tc_barrier, 0, 1);
    pthread_barrier_wait(&tc_barrier);
    pthread_barrier_destroy(&tc_barrier);
    pthread_key_create(&tc_key, 0);
    sem_init(&tc_sem, 0, 1);
    sem_wait(&tc_sem);
    sem_post(&tc_sem);
    tc_file = stdout;
    tc_off = ftello(tc_file);
    tc_time = time(0);
    tc_size = sizeof tc_mutex;
    fprintf(tc_file, "ok %ld\n", (long)tc_off);
    return 0;
}
