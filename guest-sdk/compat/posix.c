/*
 * heddle guest SDK: the POSIX corners Linux code expects, each answering
 * fixed, documented values (docs/guide/projects.md, "What the guest SDK
 * emulates"): one user and group, resource limits, no child processes,
 * System V semaphores in the program's own memory, sendfile through
 * read/write, and anonymous memory mappings.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/sendfile.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- one user, one group ------------------------------------------------ */

#define HEDDLE_UID 1000
#define HEDDLE_GID 1000

uid_t getuid(void) { return HEDDLE_UID; }
uid_t geteuid(void) { return HEDDLE_UID; }
gid_t getgid(void) { return HEDDLE_GID; }
gid_t getegid(void) { return HEDDLE_GID; }
int getgroups(int n, gid_t list[]) {
    if (n == 0)
        return 1;
    if (n < 1) {
        errno = EINVAL;
        return -1;
    }
    list[0] = HEDDLE_GID;
    return 1;
}
static int same_id(unsigned id, unsigned mine) {
    if (id == mine)
        return 0;
    errno = EPERM;
    return -1;
}
int setuid(uid_t u) { return same_id(u, HEDDLE_UID); }
int seteuid(uid_t u) { return same_id(u, HEDDLE_UID); }
int setgid(gid_t g) { return same_id(g, HEDDLE_GID); }
int setegid(gid_t g) { return same_id(g, HEDDLE_GID); }

static char pw_name[] = "heddle", pw_passwd[] = "x", pw_gecos[] = "heddle", pw_dir[] = "/",
            pw_shell[] = "/bin/sh";
static struct passwd the_user = {pw_name, pw_passwd, HEDDLE_UID, HEDDLE_GID,
                                 pw_gecos, pw_dir,    pw_shell};
static char *gr_members[] = {pw_name, 0};
static struct group the_group = {pw_name, pw_passwd, HEDDLE_GID, gr_members};
static _Thread_local int pw_next, gr_next;

struct passwd *getpwnam(const char *name) {
    return strcmp(name, pw_name) == 0 ? &the_user : 0;
}
struct passwd *getpwuid(uid_t uid) { return uid == HEDDLE_UID ? &the_user : 0; }
struct passwd *getpwent(void) { return pw_next++ == 0 ? &the_user : 0; }
void setpwent(void) { pw_next = 0; }
void endpwent(void) { pw_next = 0; }

/* Copies `s` into the caller's buffer; null when it does not fit. */
static char *put(const char *s, char **buf, size_t *left) {
    size_t n = strlen(s) + 1;
    if (n > *left)
        return 0;
    char *at = *buf;
    memcpy(at, s, n);
    *buf += n;
    *left -= n;
    return at;
}

static int copy_user(struct passwd *pw, char *buf, size_t len, struct passwd **res) {
    *pw = the_user;
    if (!(pw->pw_name = put(pw_name, &buf, &len)) ||
        !(pw->pw_passwd = put(pw_passwd, &buf, &len)) ||
        !(pw->pw_gecos = put(pw_gecos, &buf, &len)) ||
        !(pw->pw_dir = put(pw_dir, &buf, &len)) ||
        !(pw->pw_shell = put(pw_shell, &buf, &len))) {
        *res = 0;
        return ERANGE;
    }
    *res = pw;
    return 0;
}
int getpwnam_r(const char *name, struct passwd *pw, char *buf, size_t len, struct passwd **res) {
    *res = 0;
    return strcmp(name, pw_name) == 0 ? copy_user(pw, buf, len, res) : 0;
}
int getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len, struct passwd **res) {
    *res = 0;
    return uid == HEDDLE_UID ? copy_user(pw, buf, len, res) : 0;
}

struct group *getgrnam(const char *name) {
    return strcmp(name, pw_name) == 0 ? &the_group : 0;
}
struct group *getgrgid(gid_t gid) { return gid == HEDDLE_GID ? &the_group : 0; }
struct group *getgrent(void) { return gr_next++ == 0 ? &the_group : 0; }
void setgrent(void) { gr_next = 0; }
void endgrent(void) { gr_next = 0; }

static int copy_group(struct group *gr, char *buf, size_t len, struct group **res) {
    /* The member list (two pointers) first, aligned, then the strings. */
    size_t pad = (sizeof(char *) - (size_t)buf % sizeof(char *)) % sizeof(char *);
    *res = 0;
    if (len < pad + 2 * sizeof(char *))
        return ERANGE;
    char **mem = (char **)(void *)(buf + pad);
    buf += pad + 2 * sizeof(char *);
    len -= pad + 2 * sizeof(char *);
    gr->gr_gid = HEDDLE_GID;
    gr->gr_mem = mem;
    if (!(gr->gr_name = put(pw_name, &buf, &len)) ||
        !(gr->gr_passwd = put(pw_passwd, &buf, &len)))
        return ERANGE;
    mem[0] = gr->gr_name;
    mem[1] = 0;
    *res = gr;
    return 0;
}
int getgrnam_r(const char *name, struct group *gr, char *buf, size_t len, struct group **res) {
    *res = 0;
    return strcmp(name, pw_name) == 0 ? copy_group(gr, buf, len, res) : 0;
}
int getgrgid_r(gid_t gid, struct group *gr, char *buf, size_t len, struct group **res) {
    *res = 0;
    return gid == HEDDLE_GID ? copy_group(gr, buf, len, res) : 0;
}

/* ---- resource limits ---------------------------------------------------- */

/* wasm-ld's bounds of the main thread's stack (`-z stack-size`). */
extern char __stack_low, __stack_high;

static pthread_mutex_t rlimit_lock = PTHREAD_MUTEX_INITIALIZER;
static int rlimit_set[RLIMIT_NLIMITS];
static struct rlimit rlimit_now[RLIMIT_NLIMITS];

static struct rlimit rlimit_fixed(int which) {
    struct rlimit r = {RLIM_INFINITY, RLIM_INFINITY};
    switch (which) {
    case RLIMIT_NOFILE:
        r.rlim_cur = r.rlim_max = 1024;
        break;
    case RLIMIT_STACK:
        r.rlim_cur = r.rlim_max = (rlim_t)(&__stack_high - &__stack_low);
        break;
    case RLIMIT_AS:
    case RLIMIT_DATA:
        /* heddle's memory limit (runner/src/cc/compile.rs, MAX_MEMORY). */
        r.rlim_cur = r.rlim_max = 256ull << 20;
        break;
    case RLIMIT_CORE:
        r.rlim_cur = r.rlim_max = 0;
        break;
    case RLIMIT_MEMLOCK:
        r.rlim_cur = r.rlim_max = 8ull << 20;
        break;
    case RLIMIT_NPROC:
    case RLIMIT_SIGPENDING:
        r.rlim_cur = r.rlim_max = 4096;
        break;
    case RLIMIT_MSGQUEUE:
        r.rlim_cur = r.rlim_max = 819200;
        break;
    case RLIMIT_NICE:
    case RLIMIT_RTPRIO:
        r.rlim_cur = r.rlim_max = 0;
        break;
    }
    return r;
}

int getrlimit(int which, struct rlimit *r) {
    if (which < 0 || which >= RLIMIT_NLIMITS) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&rlimit_lock);
    *r = rlimit_set[which] ? rlimit_now[which] : rlimit_fixed(which);
    pthread_mutex_unlock(&rlimit_lock);
    return 0;
}

int setrlimit(int which, const struct rlimit *r) {
    if (which < 0 || which >= RLIMIT_NLIMITS || r->rlim_cur > r->rlim_max) {
        errno = EINVAL;
        return -1;
    }
    struct rlimit now;
    getrlimit(which, &now);
    /* Lowering is allowed; raising the hard limit is not (no privilege). */
    if (r->rlim_max > now.rlim_max) {
        errno = EPERM;
        return -1;
    }
    pthread_mutex_lock(&rlimit_lock);
    rlimit_now[which] = *r;
    rlimit_set[which] = 1;
    pthread_mutex_unlock(&rlimit_lock);
    return 0;
}

/* ---- processes: there are no children ---------------------------------- */

pid_t waitpid(pid_t pid, int *status, int options) {
    (void)pid;
    (void)status;
    (void)options;
    errno = ECHILD;
    return -1;
}
pid_t wait(int *status) { return waitpid(-1, status, 0); }

/* ---- System V semaphores, in the program's memory ----------------------- */

struct semset {
    int used;
    key_t key;
    int nsems;
    int mode;
    int removed;
    unsigned short *val;
    int *waiting_dec, *waiting_zero;
    time_t otime, ctime;
};

static pthread_mutex_t sem_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sem_changed = PTHREAD_COND_INITIALIZER;
static struct semset sem_sets[SEMMNI];

int semget(key_t key, int nsems, int flags) {
    int id = -1;
    pthread_mutex_lock(&sem_lock);
    if (key != IPC_PRIVATE) {
        for (int i = 0; i < SEMMNI; i++)
            if (sem_sets[i].used && sem_sets[i].key == key) {
                if ((flags & IPC_CREAT) && (flags & IPC_EXCL))
                    errno = EEXIST;
                else if (nsems > sem_sets[i].nsems)
                    errno = EINVAL;
                else
                    id = i;
                pthread_mutex_unlock(&sem_lock);
                return id;
            }
        if (!(flags & IPC_CREAT)) {
            pthread_mutex_unlock(&sem_lock);
            errno = ENOENT;
            return -1;
        }
    }
    if (nsems <= 0 || nsems > SEMMSL) {
        pthread_mutex_unlock(&sem_lock);
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < SEMMNI; i++)
        if (!sem_sets[i].used) {
            struct semset *s = &sem_sets[i];
            s->val = calloc((size_t)nsems, sizeof *s->val);
            s->waiting_dec = calloc((size_t)nsems, sizeof(int));
            s->waiting_zero = calloc((size_t)nsems, sizeof(int));
            if (!s->val || !s->waiting_dec || !s->waiting_zero) {
                free(s->val);
                free(s->waiting_dec);
                free(s->waiting_zero);
                errno = ENOMEM;
                break;
            }
            s->used = 1;
            s->removed = 0;
            s->key = key;
            s->nsems = nsems;
            s->mode = flags & 0777;
            s->otime = 0;
            s->ctime = time(0);
            id = i;
            break;
        }
    if (id < 0 && errno != ENOMEM)
        errno = ENOSPC;
    pthread_mutex_unlock(&sem_lock);
    return id;
}

static struct semset *sem_find(int id) {
    if (id < 0 || id >= SEMMNI || !sem_sets[id].used) {
        errno = EINVAL;
        return 0;
    }
    return &sem_sets[id];
}

/* Whether every operation can be applied now. */
static int sem_ready(struct semset *s, const struct sembuf *ops, size_t n, size_t *blocker) {
    for (size_t i = 0; i < n; i++) {
        int v = s->val[ops[i].sem_num];
        /* Earlier operations on the same semaphore in this call count. */
        for (size_t j = 0; j < i; j++)
            if (ops[j].sem_num == ops[i].sem_num)
                v += ops[j].sem_op;
        if ((ops[i].sem_op < 0 && v + ops[i].sem_op < 0) || (ops[i].sem_op == 0 && v != 0)) {
            *blocker = i;
            return 0;
        }
    }
    return 1;
}

int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *timeout) {
    pthread_mutex_lock(&sem_lock);
    struct semset *s = sem_find(id);
    if (!s)
        goto fail;
    if (n == 0 || n > SEMOPM) {
        errno = n == 0 ? EINVAL : E2BIG;
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        if (ops[i].sem_num >= s->nsems) {
            errno = EFBIG;
            goto fail;
        }
    struct timespec deadline;
    if (timeout) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += timeout->tv_sec;
        deadline.tv_nsec += timeout->tv_nsec;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    size_t b;
    while (!sem_ready(s, ops, n, &b)) {
        if (ops[b].sem_flg & IPC_NOWAIT) {
            errno = EAGAIN;
            goto fail;
        }
        int *count = ops[b].sem_op ? s->waiting_dec : s->waiting_zero;
        int num = ops[b].sem_num;
        count[num]++;
        int rc = timeout ? pthread_cond_timedwait(&sem_changed, &sem_lock, &deadline)
                         : pthread_cond_wait(&sem_changed, &sem_lock);
        if (!s->removed)
            count[num]--;
        if (s->removed || !s->used) {
            errno = EIDRM;
            goto fail;
        }
        if (rc == ETIMEDOUT) {
            errno = EAGAIN;
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++)
        s->val[ops[i].sem_num] = (unsigned short)(s->val[ops[i].sem_num] + ops[i].sem_op);
    s->otime = time(0);
    pthread_cond_broadcast(&sem_changed);
    pthread_mutex_unlock(&sem_lock);
    return 0;
fail:
    pthread_mutex_unlock(&sem_lock);
    return -1;
}

int semop(int id, struct sembuf *ops, size_t n) { return semtimedop(id, ops, n, 0); }

/* Linux's: the caller defines it; semctl takes it by value. */
union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
};

int semctl(int id, int num, int cmd, ...) {
    union semun arg = {0};
    va_list ap;
    va_start(ap, cmd);
    if (cmd == SETVAL || cmd == SETALL || cmd == GETALL || cmd == IPC_STAT || cmd == IPC_SET)
        arg = va_arg(ap, union semun);
    va_end(ap);
    int rc = 0;
    pthread_mutex_lock(&sem_lock);
    struct semset *s = sem_find(id);
    if (!s) {
        rc = -1;
        goto out;
    }
    if ((cmd == GETVAL || cmd == SETVAL || cmd == GETNCNT || cmd == GETZCNT || cmd == GETPID) &&
        (num < 0 || num >= s->nsems)) {
        errno = EINVAL;
        rc = -1;
        goto out;
    }
    switch (cmd) {
    case IPC_RMID:
        s->removed = 1;
        s->used = 0;
        free(s->val);
        free(s->waiting_dec);
        free(s->waiting_zero);
        s->val = 0;
        s->waiting_dec = s->waiting_zero = 0;
        pthread_cond_broadcast(&sem_changed);
        break;
    case IPC_STAT:
        memset(arg.buf, 0, sizeof *arg.buf);
        arg.buf->sem_perm.__key = s->key;
        arg.buf->sem_perm.uid = arg.buf->sem_perm.cuid = HEDDLE_UID;
        arg.buf->sem_perm.gid = arg.buf->sem_perm.cgid = HEDDLE_GID;
        arg.buf->sem_perm.mode = (mode_t)s->mode;
        arg.buf->sem_otime = s->otime;
        arg.buf->sem_ctime = s->ctime;
        arg.buf->sem_nsems = (unsigned short)s->nsems;
        break;
    case IPC_SET:
        s->mode = (int)(arg.buf->sem_perm.mode & 0777);
        break;
    case GETVAL:
        rc = s->val[num];
        break;
    case SETVAL:
        if (arg.val < 0 || arg.val > SEMVMX) {
            errno = ERANGE;
            rc = -1;
            break;
        }
        s->val[num] = (unsigned short)arg.val;
        pthread_cond_broadcast(&sem_changed);
        break;
    case GETALL:
        memcpy(arg.array, s->val, (size_t)s->nsems * sizeof *s->val);
        break;
    case SETALL:
        memcpy(s->val, arg.array, (size_t)s->nsems * sizeof *s->val);
        pthread_cond_broadcast(&sem_changed);
        break;
    case GETNCNT:
        rc = s->waiting_dec[num];
        break;
    case GETZCNT:
        rc = s->waiting_zero[num];
        break;
    case GETPID:
        rc = getpid();
        break;
    default:
        errno = EINVAL;
        rc = -1;
    }
out:
    pthread_mutex_unlock(&sem_lock);
    return rc;
}

key_t ftok(const char *path, int proj) {
    /* No inode numbers to fold in: a hash of the path, fixed per path. */
    unsigned h = 2166136261u;
    for (const char *p = path; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return (key_t)(((unsigned)(proj & 0xff) << 24) | (h & 0xffffff));
}

/* ---- sendfile ----------------------------------------------------------- */

ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
    char buf[4096];
    size_t done = 0;
    while (done < count) {
        size_t want = count - done < sizeof buf ? count - done : sizeof buf;
        ssize_t got = offset ? pread(in, buf, want, *offset) : read(in, buf, want);
        if (got < 0)
            return done ? (ssize_t)done : -1;
        if (got == 0)
            break;
        ssize_t put_at = 0;
        while (put_at < got) {
            ssize_t w = write(out, buf + put_at, (size_t)(got - put_at));
            if (w < 0) {
                if (offset)
                    *offset += put_at;
                return done + (size_t)put_at ? (ssize_t)(done + (size_t)put_at) : -1;
            }
            put_at += w;
        }
        if (offset)
            *offset += got;
        done += (size_t)got;
    }
    return (ssize_t)done;
}

/* ---- memory mappings ---------------------------------------------------- */

/* A mapping is a heap block with this header in front of it; the data
   after it is 16-byte aligned, as malloc's is (not page aligned). */
struct mapping {
    size_t len;
    unsigned magic;
} __attribute__((aligned(16)));
#define MAPPING_MAGIC 0x6d6d6170u

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    (void)addr;
    (void)prot;
    if (len == 0 || (flags & MAP_FIXED)) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    if (!(flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) != MAP_PRIVATE) {
        errno = ENODEV; /* a shared file mapping: writes would not reach the file */
        return MAP_FAILED;
    }
    struct mapping *m = calloc(1, sizeof *m + len);
    if (!m) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    m->len = len;
    m->magic = MAPPING_MAGIC;
    char *data = (char *)(m + 1);
    if (!(flags & MAP_ANONYMOUS)) {
        /* A private file mapping: a copy of the file's bytes. */
        size_t done = 0;
        while (done < len) {
            ssize_t got = pread(fd, data + done, len - done, off + (off_t)done);
            if (got < 0) {
                free(m);
                return MAP_FAILED;
            }
            if (got == 0)
                break;
            done += (size_t)got;
        }
    }
    return data;
}

int munmap(void *addr, size_t len) {
    (void)len;
    if (!addr) {
        errno = EINVAL;
        return -1;
    }
    struct mapping *m = (struct mapping *)addr - 1;
    if (m->magic != MAPPING_MAGIC) {
        errno = EINVAL;
        return -1;
    }
    /* Part of a mapping stays mapped until the whole of it is unmapped. */
    if (len >= m->len) {
        m->magic = 0;
        free(m);
    }
    return 0;
}

int mprotect(void *addr, size_t len, int prot) {
    (void)addr;
    (void)len;
    (void)prot;
    return 0;
}

int msync(void *addr, size_t len, int flags) {
    (void)addr;
    (void)len;
    (void)flags;
    return 0;
}

int madvise(void *addr, size_t len, int advice) {
    (void)addr;
    (void)len;
    (void)advice;
    return 0;
}

int posix_madvise(void *addr, size_t len, int advice) {
    (void)addr;
    (void)len;
    (void)advice;
    return 0;
}

int mlock(const void *addr, size_t len) {
    (void)addr;
    (void)len;
    return 0;
}
int munlock(const void *addr, size_t len) {
    (void)addr;
    (void)len;
    return 0;
}
int mlockall(int flags) {
    (void)flags;
    return 0;
}
int munlockall(void) { return 0; }
