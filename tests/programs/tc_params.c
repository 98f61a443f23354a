/*
 * tc_params.c — reads its parameters with fopen from a directory granted
 * with --dir (params.txt: "threads N" and "rounds M"), runs N threads that
 * each add M to a mutex-protected total, and checks the total.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

static int rounds, total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&lock);
        total++;
        pthread_mutex_unlock(&lock);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "params.txt";
    struct stat st;
    if (stat(path, &st) != 0) {
        perror("stat");
        return 1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        perror("fopen");
        return 1;
    }
    int threads = 0;
    if (fscanf(f, "threads %d rounds %d", &threads, &rounds) != 2 || threads < 1 ||
        threads > 8) {
        fprintf(stderr, "bad parameters\n");
        return 1;
    }
    fclose(f);
    pthread_t t[8];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], 0);
    printf("threads %d rounds %d total %d size %d\n", threads, rounds, total, (int)st.st_size);
    return total == threads * rounds ? 0 : 1;
}
