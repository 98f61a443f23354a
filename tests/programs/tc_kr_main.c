/*
 * tc_kr_main.c — old C that runs natively but not as plain WebAssembly:
 *
 *  - `worker` is declared without a prototype and defined without
 *    parameters, then passed to pthread_create as a start routine
 *    (an indirect call of type (i32) -> i32 to a () -> () function);
 *  - `tally` (tc_kr_util.c, `int tally(int *slot, int n)`) is called with
 *    two and three arguments through a prototype-less declaration (a direct
 *    call wasm-ld links to a signature_mismatch stub; the extra argument is
 *    dropped);
 *  - `scaled` (tc_kr_util.c, `int scaled(int x, int k)`) is declared here
 *    with one parameter, so its missing argument reads as zero;
 *  - `report` (tc_kr_util.c, returns void) is called through a pointer of
 *    type int (*)(int), whose missing result reads as zero.
 *
 * Two workers bump `hits` with a plain read-modify-write: a planted data
 * race, lost updates end in exit code 3. With -DFIXED the bump holds a lock.
 */
#include <pthread.h>
#include <stdio.h>

int tally();
int scaled(int x);
void report();
void worker();

int hits;
int slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void worker() {
#ifdef FIXED
    pthread_mutex_lock(&lock);
#endif
    int seen = hits;
    tally(&slot, 1);
    hits = seen + 1;
#ifdef FIXED
    pthread_mutex_unlock(&lock);
#endif
}

int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], 0, (void *(*)(void *))worker, 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    pthread_mutex_lock(&lock);
    int three = tally(&slot, 2, 99); /* the extra argument is dropped */
    pthread_mutex_unlock(&lock);
    int s = scaled(5); /* k missing: zero */
    int (*as_int)(int) = (int (*)(int))report;
    int r = as_int(7);
    printf("slot %d three %d scaled %d report %d hits %d\n", slot, three, s, r, hits);
    if (slot != 4 || three != 4 || s != 5 || r != 0)
        return 2;
    return hits == 2 ? 0 : 3;
}
