/* A correct program that uses the allocator heavily: malloc, calloc,
 * realloc (growing and shrinking), aligned_alloc, posix_memalign, memalign,
 * strdup, from several threads. The memory checker must report nothing. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heddle.h"

static void *churn(void *arg) {
    int id = (int)(intptr_t)arg;
    char *buf = NULL;
    size_t len = 0;
    for (int round = 0; round < 20; round++) {
        size_t n = (size_t)(round * 37 % 300 + 1);
        char *nb = realloc(buf, n);
        HEDDLE_ASSERT(nb != NULL);
        if (n > len)
            memset(nb + len, 'a' + id, n - len);
        buf = nb;
        len = n;
        int *z = calloc(n, sizeof(int));
        for (size_t i = 0; i < n; i++)
            HEDDLE_ASSERT(z[i] == 0);
        z[n - 1] = (int)n;
        free(z);
        void *al = aligned_alloc(64, 128);
        HEDDLE_ASSERT(((uintptr_t)al & 63) == 0);
        memset(al, 1, 128);
        free(al);
        void *pm = NULL;
        HEDDLE_ASSERT(posix_memalign(&pm, 32, 40) == 0);
        HEDDLE_ASSERT(((uintptr_t)pm & 31) == 0);
        ((char *)pm)[39] = 1;
        free(pm);
        void *ma = memalign(16, 24);
        ((char *)ma)[23] = 2;
        free(ma);
        char *d = strdup("heddle");
        HEDDLE_ASSERT(strcmp(d, "heddle") == 0);
        free(d);
    }
    for (size_t i = 0; i < len; i++)
        HEDDLE_ASSERT(buf[i] == 'a' + id || i < len);
    free(buf);
    return NULL;
}

int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    char *big = malloc(1 << 20);
    memset(big, 0, 1 << 20);
    free(big);
    free(NULL);
    puts("done");
    return 0;
}
