/* slaves.c -- old-style C in the manner of the SPLASH-2 programs: K&R
 * definitions, a prototype-less worker handed to pthread_create through a
 * cast, and the run's parameters read with fopen from a file.
 *
 * The planted bug: each slave adds its share to the global sum with an
 * unlocked read-modify-write, so concurrent slaves lose updates.
 * -DFIXED adds under the lock.
 *
 * Parameters (params/params.txt, read from the directory granted as /data):
 * the number of slaves and how many units each adds. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SLAVES 8

int nslaves;
int units;
long sum;
pthread_mutex_t sum_lock;
pthread_t slave_table[MAX_SLAVES];

void SlaveStart();
long share();

int
main(argc, argv)
    int argc;
    char **argv;
{
    FILE *f;
    int i;

    f = fopen("/data/params.txt", "r");
    if (f == NULL) {
        perror("/data/params.txt");
        exit(2);
    }
    if (fscanf(f, "%d %d", &nslaves, &units) != 2 || nslaves < 1 || nslaves > MAX_SLAVES) {
        fprintf(stderr, "params.txt: expected `slaves units`\n");
        exit(2);
    }
    fclose(f);
    pthread_mutex_init(&sum_lock, NULL);
    for (i = 0; i < nslaves; i++)
        pthread_create(&slave_table[i], NULL, (void *(*)(void *))SlaveStart, NULL);
    for (i = 0; i < nslaves; i++)
        pthread_join(slave_table[i], NULL);
    printf("sum %ld of %d\n", sum, nslaves * units);
    assert(sum == (long)nslaves * units);
    return 0;
}

long
share(n)
    int n;
{
    return n;
}

void
SlaveStart()
{
    int i;
    long s;

    for (i = 0; i < units; i++) {
#ifdef FIXED
        pthread_mutex_lock(&sum_lock);
        sum += share(1);
        pthread_mutex_unlock(&sum_lock);
#else
        s = sum;
        sum = s + share(1);
#endif
    }
}
