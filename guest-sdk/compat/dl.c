/*
 * heddle guest SDK: dynamic loading (<dlfcn.h>). A heddle program is one
 * module: there is nothing to load, so dlopen and dlsym fail with ENOSYS.
 */
#include <dlfcn.h>
#include <errno.h>

#include "unsupported.h"

/* ---- dynamic loading: one module, nothing to load ---------------------- */

static _Thread_local const char *dl_error;

void *dlopen(const char *file, int mode) {
    (void)file;
    (void)mode;
    ENOSYS_CALL("dlopen");
    dl_error = "dlopen is not supported in the sandbox (ENOSYS)";
    return 0;
}
void *dlsym(void *restrict handle, const char *restrict name) {
    (void)handle;
    (void)name;
    ENOSYS_CALL("dlsym");
    dl_error = "dlsym is not supported in the sandbox (ENOSYS)";
    return 0;
}
int dlclose(void *handle) {
    (void)handle;
    dl_error = "dlclose: no library is loaded in the sandbox";
    return -1;
}
char *dlerror(void) {
    const char *e = dl_error;
    dl_error = 0;
    return (char *)e;
}
