/* One memory error per mode (argv[1]), each in a single thread, so the
 * memory checker's verdicts can be tested one by one.
 *   null     read through a null pointer
 *   uaf      read a freed block
 *   double   free a block twice
 *   invalid  free a pointer into the middle of a block
 *   overflow write one element past the end of a block (user code)
 *   smash    overflow a block with strcpy (inlined into user code as a copy)
 *   libsmash overflow a block from library code (sprintf), caught at free
 *   underflow write just before the start of a block
 *   ok       none of the above */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

volatile int sink;

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    int *p = malloc(4 * sizeof(int));
    for (int i = 0; i < 4; i++)
        p[i] = i;
    if (!strcmp(mode, "null")) {
        int *volatile np = 0;
        sink = np[3];
    } else if (!strcmp(mode, "uaf")) {
        free(p);
        sink = p[1];
        return 0;
    } else if (!strcmp(mode, "double")) {
        free(p);
        free(p);
        return 0;
    } else if (!strcmp(mode, "invalid")) {
        free(p + 1);
        return 0;
    } else if (!strcmp(mode, "overflow")) {
        p[4] = 42;
    } else if (!strcmp(mode, "underflow")) {
        p[-1] = 42;
    } else if (!strcmp(mode, "smash")) {
        char *volatile s = malloc(8);
        strcpy(s, "this string is far too long");
        sink = s[0];
        free(s);
    }
    else if (!strcmp(mode, "libsmash")) {
        char *volatile s = malloc(8);
        sprintf(s, "%s %d", "formatted by the library", argc);
        free(s);
    }
    free(p);
    puts("ok");
    return 0;
}
