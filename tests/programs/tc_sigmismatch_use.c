/*
 * tc_sigmismatch_use.c — calls tc_scale through a declaration whose signature
 * differs from its definition in tc_sigmismatch_def.c (`int tc_scale(void)`
 * vs `int tc_scale(int)`). wasm-ld links the call to a `signature_mismatch:`
 * trap stub; heddle's instrumentation turns it into an adapter that calls
 * tc_scale with the missing argument zero, so the call returns 0. With
 * -DTC_MATCHING the declaration is right and the call returns 6.
 */
#ifdef TC_MATCHING
int tc_scale(int x);
#define TC_CALL tc_scale(2)
#define TC_WANT 6
#else
int tc_scale(void);
#define TC_CALL tc_scale()
#define TC_WANT 0
#endif

int main(void) { return TC_CALL == TC_WANT ? 0 : 1; }
