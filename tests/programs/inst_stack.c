/* Stack-frame exclusion at granularity `all` (tests/e2e/instrument.rs).
 * Built at -O0 so that locals really live in linear memory.
 *
 * scalar_sum: scalars on its own stack frame (at -O0 every local is a stack
 *             slot); their loads and stores are not yield points.
 * local_sum: an array on its own stack frame whose address never escapes;
 *            its loads and stores are not yield points either.
 * shared_sum: an array on its stack frame whose address is handed to another
 *             thread through pthread_create's argument; its loads and stores
 *             stay yield points.
 * printing_sum: scalars on its own frame, printed as it goes: printf is
 *             given a pointer to its variadic arguments in the frame, but
 *             keeps none, so the frame does not escape. */
#include <pthread.h>
#include <stdio.h>

#define N 64

int scalar_sum(int n) {
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += i * 3; /* SCALAR */
    return sum;
}

int local_sum(int seed) {
    int arr[N];
    int sum = 0;
    for (int i = 0; i < N; i++)
        arr[i] = seed + i; /* LOCAL_STORE */
    for (int i = 0; i < N; i++)
        sum += arr[i]; /* LOCAL_LOAD */
    return sum;
}

int printing_sum(int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) {
        sum += i; /* PRINTING */
        if (i == n - 1)
            printf("sum so far %d after %d\n", sum, i);
    }
    return sum;
}

static void *doubler(void *arg) {
    int *data = arg;
    for (int i = 0; i < N; i++)
        data[i] *= 2;
    return NULL;
}

int shared_sum(int seed) {
    int data[N];
    pthread_t t;
    for (int i = 0; i < N; i++)
        data[i] = seed + i; /* SHARED_STORE */
    pthread_create(&t, NULL, doubler, data);
    pthread_join(t, NULL);
    int sum = 0;
    for (int i = 0; i < N; i++)
        sum += data[i]; /* SHARED_LOAD */
    return sum;
}

int main(void) {
    int s = scalar_sum(N);
    int a = local_sum(1);
    int b = shared_sum(1);
    int p = printing_sum(N);
    printf("scalar %d local %d shared %d\n", s, a, b);
    return s == 3 * N * (N - 1) / 2 && a == N + N * (N - 1) / 2 && b == 2 * a &&
                   p == N * (N - 1) / 2
               ? 0
               : 1;
}
