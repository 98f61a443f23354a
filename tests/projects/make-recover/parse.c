#include <ctype.h>
#include <string.h>

#include "recparse.h"

static void fail(struct parse_ctx *ctx, const char *why) {
    ctx->why = why;
    longjmp(ctx->recover, 1);
}

static const char *parse_name(struct parse_ctx *ctx, const char *p, char *name) {
    size_t n = 0;
    while (isalpha((unsigned char)*p)) {
        if (n + 1 >= 16)
            fail(ctx, "name too long");
        name[n++] = *p++;
    }
    if (n == 0)
        fail(ctx, "empty name");
    name[n] = '\0';
    return p;
}

static long parse_amount(struct parse_ctx *ctx, const char *p) {
    long v = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*p); p++, digits++) {
        if (v > 100000000)
            fail(ctx, "amount too large");
        v = v * 10 + (*p - '0');
    }
    if (!digits)
        fail(ctx, "no amount");
    if (*p != '\0')
        fail(ctx, "junk after amount");
    return v;
}

void parse_record(struct parse_ctx *ctx, const char *text, struct record *out) {
    const char *p = parse_name(ctx, text, out->name);
    if (*p != ':')
        fail(ctx, "missing ':'");
    out->amount = parse_amount(ctx, p + 1);
}
