/* parse_test — four threads parse a batch of records each; bad records
 * are recovered from with longjmp and logged. The test checks the totals
 * and that every bad record is in the log. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "recparse.h"

#define THREADS 4

static const char *input[THREADS][3] = {
    {"alice:10", "bob:20", "carol:x"},
    {"dave:5", ":7", "erin:1"},
    {"frank:3", "grace:4", "heidi:2"},
    {"ivan:9", "judy:9z", "mallory:1"},
};

static struct errlog log_;
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static int parsed;

static void *worker(void *arg) {
    int t = (int)(long)arg;
    struct parse_ctx ctx;
    for (int i = 0; i < 3; i++) {
        struct record r;
        ctx.line = t * 3 + i + 1;
        if (setjmp(ctx.recover)) {
            /* Recovered: log it and go on with the next record. */
            errlog_add(&log_, ctx.line, ctx.why);
            continue;
        }
        parse_record(&ctx, input[t][i], &r);
        pthread_mutex_lock(&totals_lock);
        total += r.amount;
        parsed++;
        pthread_mutex_unlock(&totals_lock);
    }
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    errlog_init(&log_);
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    printf("parsed %d, total %ld, %d errors\n", parsed, total, log_.count);
    for (int i = 0; i < log_.count; i++)
        printf("  line %d: %s\n", log_.lines[i], log_.why[i]);
    assert(parsed == 9 && total == 55);
    assert(log_.count == 3 && "every bad record is logged");
    return 0;
}
