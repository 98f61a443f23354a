/*
 * <sys/sendfile.h> for heddle: sendfile copies with read (or pread, given
 * an offset) and write.
 */
#ifndef HEDDLE_SYS_SENDFILE_H
#define HEDDLE_SYS_SENDFILE_H
#include <sys/types.h>
#ifdef __cplusplus
extern "C" {
#endif

ssize_t sendfile(int, int, off_t *, size_t);

#ifdef __cplusplus
}
#endif
#endif
