// setjmp/longjmp over wasm exception handling: the runtime half of LLVM's
// `-mllvm -wasm-enable-sjlj` lowering, which heddle's driver turns on.
//
// The compiler turns `setjmp(env)` into `__wasm_setjmp(env, label, id)`,
// where `label` (non-zero) numbers the setjmp call in its function and
// `id` names the function's current invocation, and `longjmp(env, val)`
// into `__wasm_longjmp(env, val)`. A longjmp throws the `__c_longjmp` tag
// (tag 1 of `__builtin_wasm_throw`) with the address of `{env, val}`; every
// function that called setjmp catches it, asks `__wasm_setjmp_test` whether
// `env` was set by its own invocation, and either resumes after that setjmp
// (returning `val`) or throws it on. The first words of a jmp_buf belong to
// this runtime.
#include <stdint.h>

struct heddle_jmp_buf {
    void *invocation;
    uint32_t label;
    struct {
        void *env;
        int val;
    } thrown;
};

_Static_assert(sizeof(struct heddle_jmp_buf) <= 6 * sizeof(void *),
               "the runtime's part of a jmp_buf is six words");

void __wasm_setjmp(void *env, uint32_t label, void *invocation) {
    struct heddle_jmp_buf *b = env;
    b->invocation = invocation;
    b->label = label;
}

uint32_t __wasm_setjmp_test(void *env, void *invocation) {
    struct heddle_jmp_buf *b = env;
    return b->invocation == invocation ? b->label : 0;
}

void __wasm_longjmp(void *env, int val) {
    struct heddle_jmp_buf *b = env;
    b->thrown.env = env;
    b->thrown.val = val == 0 ? 1 : val;
    __builtin_wasm_throw(1, &b->thrown);
}
