/* One thread making N plain accesses to a global: every access is a yield
 * point at granularity `all`, and with one thread none of them switches.
 * Measures the cost of a yield point that does not switch. */
#include <stdlib.h>

volatile int counter;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    for (int i = 0; i < n; i++)
        counter = counter + 1; /* one load + one store */
    return counter == n ? 0 : 1;
}
