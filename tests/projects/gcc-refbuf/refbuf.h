#ifndef REFBUF_H
#define REFBUF_H
#include <stddef.h>

/* A reference-counted byte buffer shared between threads. */
struct refbuf;

struct refbuf *refbuf_new(size_t len);
struct refbuf *refbuf_get(struct refbuf *b);
void refbuf_put(struct refbuf *b);
char *refbuf_data(struct refbuf *b);
size_t refbuf_len(const struct refbuf *b);

#endif
