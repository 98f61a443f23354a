/*
 * tc_sigmismatch_use.c — calls tc_scale through a declaration whose signature
 * differs from its definition in tc_sigmismatch_def.c (`int tc_scale(void)`
 * vs `int tc_scale(int)`). wasm-ld links the call to a `signature_mismatch:`
 * trap stub, which `heddle cc` must reject. With -DTC_MATCHING the
 * declaration is right and the program links.
 */
#ifdef TC_MATCHING
int tc_scale(int x);
#define TC_CALL tc_scale(2)
#else
int tc_scale(void);
#define TC_CALL tc_scale()
#endif

int main(void) { return TC_CALL == 6 ? 0 : 1; }
