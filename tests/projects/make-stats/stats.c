/* stats.c — the library. The planted bug: stats_record takes the lock for
 * the sum but updates the count outside it, so two threads can read the
 * same count and both write count + 1 (a lost update). -DFIXED moves the
 * count under the lock. */
#include <pthread.h>

#include "stats.h"

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

void stats_record(struct stats *s, int value) {
    pthread_mutex_lock(&stats_lock);
    s->sum += value;
#ifdef FIXED
    s->count++;
#endif
    pthread_mutex_unlock(&stats_lock);
#ifndef FIXED
    long c = s->count;
    s->count = c + 1;
#endif
}

long stats_count(const struct stats *s) { return s->count; }

long stats_sum(const struct stats *s) { return s->sum; }
