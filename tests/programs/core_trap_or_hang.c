/* A target whose outcome is a controlled choice: pass, trap, hang or
 * assertion, picked by heddle_choose. Used to check that traps and hangs in
 * single runs never stop a campaign. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

volatile int spin_forever;

static void *worker(void *arg) {
    (void)arg;
    switch (heddle_choose(4)) {
    case 1: /* trap: out-of-bounds access */
        *(volatile int *)0x7ffffff0 = 1;
        break;
    case 2: /* hang: a loop with no exit */
        while (!spin_forever)
            ;
        break;
    case 3:
        heddle_fail("chosen failure");
        break;
    default:
        break;
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    puts("done");
    return 0;
}
