/* Thousands of threads alive at once, each taking a mutex: the linear
 * memory holds every stack until its thread is joined. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int counter;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void *w(void *a) { pthread_mutex_lock(&m); counter++; pthread_mutex_unlock(&m); return 0; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  pthread_t *t = malloc(sizeof *t * n);
  for (int i = 0; i < n; i++) { int e = pthread_create(&t[i], 0, w, 0); if (e) { printf("create %d failed: %d\n", i, e); return 1; } }
  for (int i = 0; i < n; i++) pthread_join(t[i], 0);
  printf("%d\n", counter); return counter == n ? 0 : 2;
}
