/*
 * tc_legacy.c — old (K&R) C: implicit int, old-style parameter declarations,
 * and a call to a function that has no declaration in scope. clang 19
 * rejects it by default; `heddle cc --legacy` accepts it.
 */
#include <stdio.h>

add(a, b)
int a, b;
{
    return a + b;
}

main()
{
    int s = add(2, 3);
    int t = twice(s); /* implicit declaration */
    printf("sum %d twice %d\n", s, t);
    return t == 10 ? 0 : 1;
}

twice(x) /* implicit int parameter */
{
    return 2 * x;
}
