/* heddle guest SDK: see unsupported.c. */
#ifndef HEDDLE_UNSUPPORTED_H
#define HEDDLE_UNSUPPORTED_H
#include <errno.h>

void __heddle_unsupported(const char *call, int *said);

/* Fails the calling function's call: -1/NULL is the caller's to return. */
#define ENOSYS_CALL(name)                                                                  \
    do {                                                                                   \
        static int said;                                                                   \
        __heddle_unsupported(name, &said);                                                 \
        errno = ENOSYS;                                                                    \
    } while (0)
#endif
