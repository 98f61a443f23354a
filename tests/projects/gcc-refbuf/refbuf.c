#include "refbuf.h"

#include <stdlib.h>
#include <string.h>

struct refbuf {
    int refs;
    size_t len;
    char *data;
};

struct refbuf *refbuf_new(size_t len) {
    struct refbuf *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    b->data = calloc(1, len);
    if (!b->data) {
        free(b);
        return NULL;
    }
    b->refs = 1;
    b->len = len;
    return b;
}

#ifdef FIXED
static int add_ref(struct refbuf *b, int d) { return __atomic_add_fetch(&b->refs, d, __ATOMIC_ACQ_REL); }
#else
/* The bug: the count is read and written back without synchronisation, so
 * two threads releasing at once can both see the same count. */
static int add_ref(struct refbuf *b, int d) {
    int n = b->refs + d;
    b->refs = n;
    return n;
}
#endif

struct refbuf *refbuf_get(struct refbuf *b) {
    add_ref(b, 1);
    return b;
}

void refbuf_put(struct refbuf *b) {
    if (add_ref(b, -1) == 0) {
        free(b->data);
        free(b);
    }
}

char *refbuf_data(struct refbuf *b) { return b->data; }
size_t refbuf_len(const struct refbuf *b) { return b->len; }
