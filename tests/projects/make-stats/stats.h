/* stats.h — a tiny statistics library shared by several threads. */
#ifndef STATS_H
#define STATS_H

struct stats {
    long count;
    long sum;
};

void stats_record(struct stats *s, int value);
long stats_count(const struct stats *s);
long stats_sum(const struct stats *s);

#endif
