/* recparse — parse "name:amount" records; a bad record is reported to an
 * error log shared by every thread that parses. */
#ifndef RECPARSE_H
#define RECPARSE_H

#include <setjmp.h>

struct record {
    char name[16];
    long amount;
};

/* The per-thread parsing context: errors deep in the parser longjmp to
 * `recover`, with `why` set. */
struct parse_ctx {
    jmp_buf recover;
    const char *why;
    int line;
};

/* Parses one record; on error longjmps to ctx->recover. */
void parse_record(struct parse_ctx *ctx, const char *text, struct record *out);

/* The shared error log. */
#define ERRLOG_MAX 64
struct errlog {
    int count;
    int lines[ERRLOG_MAX];
    const char *why[ERRLOG_MAX];
};

void errlog_init(struct errlog *log);
void errlog_add(struct errlog *log, int line, const char *why);

#endif
