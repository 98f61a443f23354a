// errors_test — exceptions thrown on the pool's threads reach the caller
// of wait() with their type, a lock held by a failing task is released as
// it unwinds, and the pool keeps working after failures.
#include <atomic>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "check.hpp"
#include "jobs/batch.hpp"

namespace {

struct config_error : std::runtime_error {
    explicit config_error(const std::string &key)
        : std::runtime_error("bad config key: " + key), key(key) {}
    std::string key;
};

int parse_port(const std::string &s) {
    std::size_t used = 0;
    int port = std::stoi(s, &used); // std::invalid_argument for "http"
    if (used != s.size() || port <= 0 || port > 65535)
        throw config_error("port=" + s);
    return port;
}

} // namespace

int main() {
    jobs::Pool pool(2);

    // One failing task: its exception comes back to this thread, by type.
    {
        jobs::Batch batch(pool);
        std::atomic<int> ports{0};
        for (std::string s : {"80", "8080", "99999", "443"})
            batch.run([s, &ports] {
                parse_port(s);
                ports++;
            });
        try {
            batch.wait();
            CHECK(!"a task failed, wait() must throw");
        } catch (const jobs::batch_error &e) {
            CHECK(e.failed() == 1);
            try {
                std::rethrow_exception(e.first());
            } catch (const config_error &c) {
                std::cout << "caught " << c.what() << "\n";
                CHECK(c.key == "port=99999");
            }
        }
        CHECK(ports == 3);
    }

    // A task that throws while holding a lock releases it as it unwinds,
    // and an exception caught inside a task stays there.
    {
        std::mutex m;
        std::vector<int> seen;
        jobs::Batch batch(pool);
        batch.run([&] {
            std::lock_guard<std::mutex> g(m);
            seen.push_back(1);
            throw std::logic_error("thrown under the lock");
        });
        batch.run([&] {
            CHECK(throws<std::invalid_argument>([] { parse_port("http"); }));
            CHECK(throws<std::out_of_range>([] {
                std::vector<int> v(3);
                return jobs::checked(v, 3);
            }));
        });
        batch.run([&] {
            std::lock_guard<std::mutex> g(m);
            seen.push_back(2);
        });
        CHECK(throws<jobs::batch_error>([&] { batch.wait(); }));
        CHECK(seen.size() == 2);
        CHECK(batch.done() == 3);
    }

    // After failures the pool still runs tasks; a clean batch does not throw.
    {
        jobs::Batch batch(pool);
        std::atomic<long> sum{0};
        for (int i = 1; i <= 10; i++)
            batch.run([i, &sum] { sum += i; });
        batch.wait();
        CHECK(sum == 55);
    }
    std::cout << "errors_test: ok" << std::endl;
    return 0;
}
