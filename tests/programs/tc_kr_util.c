/* tc_kr_util.c — definitions tc_kr_main.c calls with other signatures. */
#include <stdio.h>

int tally(int *slot, int n) {
    *slot += n;
    return *slot;
}

int scaled(int x, int k) { return x + 100 * k; }

void report(int code) { printf("report %d\n", code); }
