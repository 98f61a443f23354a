/*
 * heddle guest SDK: how a call the sandbox cannot serve fails. It sets
 * errno to ENOSYS and writes one line naming the call to stderr (once per
 * call), so a run's output says which call it was.
 */
#include <string.h>
#include <unistd.h>

#include "unsupported.h"

void __heddle_unsupported(const char *call, int *said) {
    if (*said)
        return;
    *said = 1;
    static const char pre[] = "heddle: ";
    static const char post[] = " is not supported in the sandbox (ENOSYS)\n";
    char line[160];
    size_t n = 0, k = strlen(call);
    if (k > sizeof line - sizeof pre - sizeof post)
        k = sizeof line - sizeof pre - sizeof post;
    memcpy(line, pre, sizeof pre - 1);
    n += sizeof pre - 1;
    memcpy(line + n, call, k);
    n += k;
    memcpy(line + n, post, sizeof post - 1);
    n += sizeof post - 1;
    (void)!write(2, line, n);
}
