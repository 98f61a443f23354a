// batch_test — several tasks fail at once on different workers: wait()
// reports how many, and the first failure is one of theirs.
#include <atomic>
#include <cstdio>
#include <vector>

#include "check.hpp"
#include "jobs/batch.hpp"

int main() {
    jobs::Pool pool(3);
    const std::vector<int> table{10, 20, 30};
    std::atomic<int> sum{0};

    jobs::Batch batch(pool);
    for (std::size_t i = 0; i < 6; i++)
        batch.run([&table, &sum, i] { sum += jobs::checked(table, i); }); // 3..5 throw

    std::size_t failed = 0;
    try {
        batch.wait();
    } catch (const jobs::batch_error &e) {
        failed = e.failed();
        std::printf("%s\n", e.what());
        CHECK(throws<std::out_of_range>([&] { std::rethrow_exception(e.first()); }));
    }
    CHECK(sum == 60);
    CHECK(failed == 3);
    std::printf("batch_test: ok\n");
    return 0;
}
