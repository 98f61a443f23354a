/* Stack overflows, each chosen by argv[1], that heddle must report as
 * stack overflows naming the thread, its stack size and how to raise it:
 *   main    two large arrays in main's frame: the stack pointer wraps below 0
 *   thread  unbounded recursion in a thread with the default stack
 *   attr    the same in a thread given 128 KiB with pthread_attr_setstacksize
 *   null    main's frame reaches the null page, where the memory checker sees
 *           a write through a pointer to it
 *   oob     not an overflow: an out-of-bounds write, which stays a plain trap */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

volatile int sink;

static int recurse(int n) {
    volatile char frame[256];
    frame[n & 255] = (char)n;
    if (n == 0)
        return frame[0];
    return recurse(n - 1) + frame[(n * 7) & 255];
}

static void *deep(void *arg) {
    sink = recurse((int)(intptr_t)arg);
    return NULL;
}

__attribute__((noinline)) static int big_frame(int seed) {
    int a[12000], b[12000];
    for (int i = 0; i < 12000; i++) {
        a[i] = i * seed;
        b[i] = a[i] + sink;
    }
    return a[seed * 7] + b[seed * 9];
}

__attribute__((noinline)) static void fill(char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = (char)i;
}

/* A frame that ends 512 bytes above address 0, written by another
 * function (so through a pointer the memory checker sees). */
__attribute__((noinline)) static int to_null_page(void) {
    char probe;
    size_t n = (size_t)(uintptr_t)&probe - 512;
    char buf[n];
    fill(buf, 64);
    return buf[5];
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "main";
    pthread_t t;
    if (!strcmp(mode, "main")) {
        sink = big_frame(argc);
    } else if (!strcmp(mode, "thread")) {
        pthread_create(&t, NULL, deep, (void *)(intptr_t)100000);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "attr")) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 128 * 1024);
        pthread_create(&t, &attr, deep, (void *)(intptr_t)100000);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "null")) {
        sink = to_null_page();
    } else if (!strcmp(mode, "oob")) {
        *(volatile int *)0x7ffffff0 = 1;
    }
    printf("%d\n", sink);
    return 0;
}
