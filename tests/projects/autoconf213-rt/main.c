#include <assert.h>
#include <stdio.h>
#include "rt.h"

static int runs[4];

/* Found by name through the runtime's dlsym. */
void rt_task_count(int id)
{
    rt_lock();
    runs[id]++;
    rt_unlock();
}

int main(void)
{
    long done;
    assert(rt_init() == 0);
    assert(rt_max_workers() == 4);
    done = rt_pool_run("rt_task_count", 2, 2);
    printf("completed %ld\n", done);
    assert(runs[0] == 2 && runs[1] == 2);
    assert(done == 4);
    return 0;
}
