/*
 * heddle guest SDK: dynamic loading (<dlfcn.h>). A heddle program is one
 * static module. dlopen(NULL, mode) returns a handle to the program
 * itself; dlsym on it (or on RTLD_DEFAULT) finds the program's functions
 * with external linkage in the table heddle's driver adds at the final
 * link of a program that calls dlsym (`__heddle_dl_symbols`, see
 * runner/src/cc/dltable.rs). dlopen of a file fails: there is nothing to
 * load, and dlerror() says so.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unsupported.h"

struct heddle_dl_symbol {
    const char *name;
    void *addr;
};

/* Generated at the final link; absent (null) in a program without dlsym. */
extern const struct heddle_dl_symbol __heddle_dl_symbols[] __attribute__((weak));

/* The program's handle: dlopen(NULL) returns its address. */
static const char dl_self = 0;
#define DL_SELF ((void *)&dl_self)

static _Thread_local const char *dl_error;
static _Thread_local char dl_message[256];

static void dl_fail(const char *fmt, const char *what) {
    snprintf(dl_message, sizeof dl_message, fmt, what);
    dl_error = dl_message;
}

void *dlopen(const char *file, int mode) {
    (void)mode;
    if (file == 0)
        return DL_SELF;
    ENOSYS_CALL("dlopen");
    dl_fail("%s: cannot load a shared object: a heddle program is one static wasm module "
            "(link the library into the program; dlopen(NULL) is the program itself)",
            file);
    return 0;
}

void *dlsym(void *restrict handle, const char *restrict name) {
    if (handle == RTLD_NEXT) {
        dl_fail("%s: RTLD_NEXT: no object follows the program", name);
        return 0;
    }
    if (handle != DL_SELF && handle != RTLD_DEFAULT) {
        dl_fail("%s: invalid handle (only dlopen(NULL) and RTLD_DEFAULT are)", name);
        return 0;
    }
    if (__heddle_dl_symbols != 0)
        for (const struct heddle_dl_symbol *s = __heddle_dl_symbols; s->name; s++)
            if (strcmp(s->name, name) == 0)
                return s->addr;
    dl_fail("%s: undefined symbol (dlsym finds the program's functions with external linkage)",
            name);
    return 0;
}

int dlclose(void *handle) {
    if (handle == DL_SELF)
        return 0;
    dl_error = "dlclose: invalid handle";
    return -1;
}

char *dlerror(void) {
    const char *e = dl_error;
    dl_error = 0;
    return (char *)e;
}
