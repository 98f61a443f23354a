/*
 * The POSIX corners Linux code expects, each answering the fixed values
 * docs/guide/projects.md documents: dlopen(NULL)/dlsym, the user and group,
 * resource limits, uname, waitpid, System V semaphores (two threads hand a
 * token back and forth), sendfile, mmap, the socket constants and __unix__.
 */
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(__unix__) || !defined(__unix)
#error "__unix__ and __unix are defined"
#endif

union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
};

int plugin_answer(int x) { return x * 2 + 1; }

static int sem;
static int turns;

static void sem_add(int num, int delta) {
    struct sembuf op = {(unsigned short)num, (short)delta, 0};
    assert(semop(sem, &op, 1) == 0);
}

static void *ping(void *arg) {
    (void)arg;
    for (int i = 0; i < 3; i++) {
        sem_add(0, -1); /* wait for our turn */
        turns++;
        sem_add(1, 1); /* hand it back */
    }
    return 0;
}

int main(void) {
    /* dlopen(NULL) is the program; dlsym finds its functions. */
    void *self = dlopen(NULL, RTLD_LAZY);
    assert(self != NULL);
    int (*fn)(int) = (int (*)(int))dlsym(self, "plugin_answer");
    assert(fn != NULL && fn(20) == 41);
    assert(dlsym(RTLD_DEFAULT, "plugin_answer") == (void *)fn);
    assert(dlsym(self, "no_such_function") == NULL);
    const char *err = dlerror();
    assert(err && strstr(err, "no_such_function"));
    assert(dlerror() == NULL);
    assert(dlopen("libplugin.so", RTLD_NOW) == NULL);
    err = dlerror();
    assert(err && strstr(err, "libplugin.so"));
    assert(dlclose(self) == 0);

    /* One user, one group. */
    assert(getuid() == 1000 && geteuid() == 1000);
    assert(getgid() == 1000 && getegid() == 1000);
    struct passwd *pw = getpwuid(getuid());
    assert(pw && strcmp(pw->pw_name, "heddle") == 0 && pw->pw_gid == 1000);
    assert(strcmp(pw->pw_dir, "/") == 0);
    assert(getpwnam("root") == NULL);
    struct passwd pwbuf, *pwres;
    char buf[256];
    assert(getpwnam_r("heddle", &pwbuf, buf, sizeof buf, &pwres) == 0 && pwres == &pwbuf);
    assert(pwbuf.pw_uid == 1000 && strcmp(pwbuf.pw_shell, "/bin/sh") == 0);
    struct group *gr = getgrgid(1000);
    assert(gr && strcmp(gr->gr_name, "heddle") == 0 && strcmp(gr->gr_mem[0], "heddle") == 0);
    struct group grbuf, *grres;
    assert(getgrnam_r("heddle", &grbuf, buf, sizeof buf, &grres) == 0 && grres == &grbuf);
    assert(grbuf.gr_gid == 1000 && grbuf.gr_mem[1] == NULL);

    /* Resource limits. */
    struct rlimit rl;
    assert(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == 1024 && rl.rlim_max == 1024);
    assert(getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur == 65536);
    assert(getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur == 256u << 20);
    assert(getrlimit(RLIMIT_CPU, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY);
    rl.rlim_cur = rl.rlim_max = 256;
    assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    assert(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == 256);
    rl.rlim_cur = rl.rlim_max = 4096;
    assert(setrlimit(RLIMIT_NOFILE, &rl) == -1 && errno == EPERM);

    /* uname: wasi-libc's fixed answer. */
    struct utsname u;
    assert(uname(&u) == 0);
    assert(strcmp(u.sysname, "wasi") == 0 && strcmp(u.machine, "wasm32") == 0);

    /* No child processes. */
    int status = 0;
    assert(waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD);
    assert(wait(&status) == -1 && errno == ECHILD);
    assert(WIFEXITED(0) && WEXITSTATUS(3 << 8) == 3 && !WIFSIGNALED(0));

    /* System V semaphores: real synchronisation between threads. */
    sem = semget(IPC_PRIVATE, 2, IPC_CREAT | 0600);
    assert(sem >= 0);
    union semun arg;
    arg.val = 1;
    assert(semctl(sem, 0, SETVAL, arg) == 0);
    assert(semctl(sem, 0, GETVAL) == 1);
    struct semid_ds ds;
    arg.buf = &ds;
    assert(semctl(sem, 0, IPC_STAT, arg) == 0 && ds.sem_nsems == 2);
    struct sembuf nowait = {1, -1, IPC_NOWAIT};
    assert(semop(sem, &nowait, 1) == -1 && errno == EAGAIN);
    pthread_t t;
    assert(pthread_create(&t, NULL, ping, NULL) == 0);
    for (int i = 0; i < 3; i++) {
        sem_add(1, -1);
        if (i < 2)
            sem_add(0, 1);
    }
    pthread_join(t, NULL);
    assert(turns == 3);
    assert(semget(1234, 1, IPC_CREAT | 0600) >= 0);
    assert(semget(1234, 1, IPC_CREAT | IPC_EXCL | 0600) == -1 && errno == EEXIST);
    assert(semget(4321, 1, 0) == -1 && errno == ENOENT);
    assert(semctl(sem, 0, IPC_RMID) == 0);
    assert(semctl(sem, 0, GETVAL) == -1 && errno == EINVAL);

    /* sendfile copies through read and write (in the directory granted as
       /data). */
    int src = open("/data/posix_corners.in", O_CREAT | O_TRUNC | O_RDWR, 0600);
    int dst = open("/data/posix_corners.out", O_CREAT | O_TRUNC | O_RDWR, 0600);
    assert(src >= 0 && dst >= 0);
    assert(write(src, "0123456789", 10) == 10);
    off_t at = 2;
    assert(sendfile(dst, src, &at, 5) == 5 && at == 7);
    char got[8] = {0};
    assert(pread(dst, got, sizeof got, 0) == 5 && strcmp(got, "23456") == 0);
    close(src);
    close(dst);
    unlink("/data/posix_corners.in");
    unlink("/data/posix_corners.out");

    /* Anonymous mappings are zero-filled memory. */
    unsigned char *m = mmap(NULL, 100000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert(m != MAP_FAILED && (unsigned long)m % 16 == 0);
    for (int i = 0; i < 100000; i += 997)
        assert(m[i] == 0);
    m[99999] = 7;
    assert(mprotect(m, 4096, PROT_READ) == 0);
    assert(munmap(m, 100000) == 0);
    assert(mmap(NULL, 10, PROT_READ, MAP_SHARED, 0, 0) == MAP_FAILED && errno == ENODEV);

    /* Socket constants: Linux's values. */
    assert(SO_REUSEADDR == 2 && SO_ERROR == 4 && SO_KEEPALIVE == 9 && SO_LINGER == 13);
    assert(SO_SNDBUF == 7 && SO_RCVBUF == 8 && PF_UNIX == AF_UNIX && PF_INET == AF_INET);
    struct linger lg = {1, 5};
    (void)lg;

    puts("posix corners: ok");
    return 0;
}
