#include <pthread.h>

#include "recparse.h"

#ifdef FIXED
static pthread_mutex_t errlog_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

void errlog_init(struct errlog *log) {
    log->count = 0;
}

void errlog_add(struct errlog *log, int line, const char *why) {
#ifdef FIXED
    pthread_mutex_lock(&errlog_lock);
#endif
    int n = log->count;
    if (n < ERRLOG_MAX) {
        log->lines[n] = line;
        log->why[n] = why;
        log->count = n + 1;
    }
#ifdef FIXED
    pthread_mutex_unlock(&errlog_lock);
#endif
}
