/*
 * heddle_compat.h — force-included by `heddle cc` into every translation unit.
 *
 * Declares the calls that the guest SDK compatibility library provides but the
 * threads wasi-libc headers do not declare. Nothing here changes the meaning
 * of a program that does not use these calls.
 */
#ifndef HEDDLE_COMPAT_H
#define HEDDLE_COMPAT_H
#if defined(__wasm__)
#ifdef __cplusplus
extern "C" {
#endif
/* Ends the calling thread with `retval` as its join value. */
__attribute__((noreturn)) void pthread_exit(void *retval);
/* Aligned allocation (the threads wasi-libc headers do not declare these). */
void *memalign(__SIZE_TYPE__ alignment, __SIZE_TYPE__ size);
void *valloc(__SIZE_TYPE__ size);
#ifdef __cplusplus
}
#endif
#endif
#endif
