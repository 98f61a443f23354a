// Prints two draws of the guest's random bytes (WASI `random_get`, through
// `getentropy`): a function of the run's seed only.
#include <stdio.h>
#include <unistd.h>

static void show(void) {
    unsigned char b[12];
    if (getentropy(b, sizeof b) != 0) {
        printf("getentropy failed\n");
        return;
    }
    for (unsigned i = 0; i < sizeof b; i++)
        printf("%02x", b[i]);
    printf("\n");
}

int main(void) {
    show();
    show();
    return 0;
}
