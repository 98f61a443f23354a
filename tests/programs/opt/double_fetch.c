// A request whose length a second thread may change while a handler
// copies it: the handler checks the length, then reads it again to copy
// (a double fetch). Built at -O0 the two reads stay apart and the copy can
// overflow its buffer; an optimising build reads the length once.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 16

struct request {
    unsigned len;
    char data[64];
};

static struct request *shared;

static void handle(struct request *req, char *out) {
    if (req->len > CAP) {
        printf("rejected %u\n", req->len);
        return;
    }
    memcpy(out, req->data, req->len);
}

static void *client(void *arg) {
    struct request *req = arg;
    for (int i = 0; i < 4; i++)
        req->len = (i % 2) ? 40 : 8;
    return NULL;
}

int main(void) {
    shared = calloc(1, sizeof *shared);
    shared->len = 8;
    memset(shared->data, 'x', sizeof shared->data);
    char *out = malloc(CAP);
    pthread_t t;
    pthread_create(&t, NULL, client, shared);
    for (int i = 0; i < 3; i++)
        handle(shared, out);
    pthread_join(t, NULL);
    printf("done\n");
    free(out);
    free(shared);
    return 0;
}
