/*
 * log_workers.c — worker threads append records to a log in a granted
 * directory, the way a small service writes its journal, then main checks
 * the journal and tidies the directory.
 *
 * Each worker appends its records to /data/out/journal.log under a mutex
 * (with "racy" as the first argument, the counter of records written is
 * updated without it: a lost update). main then reads the journal back,
 * publishes a summary with the write-to-a-temporary-then-rename idiom, and
 * exercises the calls such code uses: mkdir, readdir, stat, symlink and
 * readlink, link, truncate, lseek/pread/pwrite, O_EXCL, rmdir, unlink.
 * It expects the directory as granted: only input.txt (its first line is
 * the number of records per worker) — a run that saw another run's files
 * fails.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WORKERS 3

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int records_written;
static int per_worker;
static int racy;

static void append_record(int worker, int i) {
    FILE *f = fopen("/data/out/journal.log", "a");
    assert(f != NULL);
    fprintf(f, "worker %d record %d\n", worker, i);
    fclose(f);
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (int i = 0; i < per_worker; i++) {
        pthread_mutex_lock(&log_lock);
        append_record(id, i);
        if (!racy)
            records_written++;
        pthread_mutex_unlock(&log_lock);
        if (racy) {
            int seen = records_written;
            records_written = seen + 1;
        }
    }
    return NULL;
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    assert(f != NULL);
    int lines = 0, c;
    while ((c = fgetc(f)) != EOF)
        lines += c == '\n';
    fclose(f);
    return lines;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted, each followed by a space. */
static void list(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    assert(d != NULL);
    char *names[16];
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        assert(count < 16);
        names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof names[0], by_name);
    out[0] = 0;
    for (int i = 0; i < count; i++) {
        strncat(out, names[i], cap - strlen(out) - 2);
        strcat(out, " ");
        free(names[i]);
    }
}

int main(int argc, char **argv) {
    racy = argc > 1 && strcmp(argv[1], "racy") == 0;
    char names[256];
    list("/data", names, sizeof names);
    assert(strcmp(names, "input.txt ") == 0);
    FILE *in = fopen("/data/input.txt", "r");
    assert(in != NULL && fscanf(in, "%d", &per_worker) == 1);
    fclose(in);

    assert(mkdir("/data/out", 0755) == 0);
    assert(mkdir("/data/out", 0755) == -1 && errno == EEXIST);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        assert(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    int lines = count_lines("/data/out/journal.log");
    assert(lines == WORKERS * per_worker);
    assert(records_written == lines);

    /* Publish a summary: write a temporary, then rename it into place. */
    int fd = open("/data/out/summary.tmp", O_CREAT | O_EXCL | O_WRONLY, 0644);
    assert(fd >= 0);
    char buf[64];
    int n = snprintf(buf, sizeof buf, "records %d\n", lines);
    assert(write(fd, buf, n) == n);
    assert(pwrite(fd, "R", 1, 0) == 1);
    close(fd);
    assert(open("/data/out/summary.tmp", O_CREAT | O_EXCL | O_WRONLY, 0644) == -1 && errno == EEXIST);
    assert(rename("/data/out/summary.tmp", "/data/out/summary") == 0);
    struct stat st;
    assert(stat("/data/out/summary", &st) == 0 && st.st_size == n && S_ISREG(st.st_mode));
    assert(stat("/data/out/summary.tmp", &st) == -1 && errno == ENOENT);

    /* Links. */
    assert(symlink("summary", "/data/out/latest") == 0);
    char target[32] = {0};
    assert(readlink("/data/out/latest", target, sizeof target - 1) == 7);
    assert(strcmp(target, "summary") == 0);
    assert(lstat("/data/out/latest", &st) == 0 && S_ISLNK(st.st_mode));
    assert(stat("/data/out/latest", &st) == 0 && st.st_size == n);
    assert(link("/data/out/summary", "/data/out/summary.bak") == 0);
    assert(stat("/data/out/summary", &st) == 0 && st.st_nlink == 2);
    list("/data/out", names, sizeof names);
    assert(strcmp(names, "journal.log latest summary summary.bak ") == 0);

    /* Read it back through the link, seek, truncate. */
    fd = open("/data/out/latest", O_RDWR);
    assert(fd >= 0);
    char got[64] = {0};
    assert(pread(fd, got, sizeof got - 1, 0) == n && strncmp(got, "Records ", 8) == 0);
    assert(lseek(fd, 0, SEEK_END) == n);
    assert(ftruncate(fd, 3) == 0);
    assert(lseek(fd, 0, SEEK_END) == 3);
    close(fd);
    fd = open("/data/out/summary.bak", O_RDONLY);
    assert(read(fd, got, sizeof got) == 3 && memcmp(got, "Rec", 3) == 0);
    assert(write(fd, "x", 1) == -1 && errno == EBADF);
    close(fd);

    /* Tidy up: a directory with files in it cannot go. */
    assert(rmdir("/data/out") == -1 && errno == ENOTEMPTY);
    assert(unlink("/data/out") == -1 && (errno == EISDIR || errno == EPERM));
    const char *files[] = {"journal.log", "latest", "summary", "summary.bak"};
    for (int i = 0; i < 4; i++) {
        char p[64];
        snprintf(p, sizeof p, "/data/out/%s", files[i]);
        assert(unlink(p) == 0);
    }
    assert(rmdir("/data/out") == 0);
    assert(open("/data/../etc/passwd", O_RDONLY) == -1);
    printf("journal: %d records\n", lines);
    return 0;
}
