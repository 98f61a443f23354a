/* Allocation-heavy single-threaded kernel: N rounds of malloc/calloc/
 * realloc/free of varying sizes, touching each block. Measures the memory
 * checker's overhead (memcheck on vs off). */
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    void *keep[16] = {0};
    unsigned sum = 0;
    for (int i = 0; i < n; i++) {
        size_t sz = (size_t)(i * 37 % 256 + 1);
        char *p = malloc(sz);
        memset(p, i, sz);
        int *q = calloc(4, sizeof(int));
        q[3] = i;
        sum += (unsigned)p[sz - 1] + (unsigned)q[3];
        free(q);
        int slot = i % 16;
        keep[slot] = realloc(keep[slot], sz * 2);
        ((char *)keep[slot])[0] = (char)i;
        free(p);
    }
    for (int i = 0; i < 16; i++)
        free(keep[i]);
    return sum == 0xdeadbeef;
}
