// jobs/pool.hpp — a fixed-size pool of worker threads running queued
// tasks in submission order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jobs {

class Pool {
public:
    explicit Pool(unsigned workers);
    ~Pool();
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;

    /// Queues `task`; a worker runs it. A task must not throw: wrap it
    /// (Batch does) to carry its exception somewhere.
    void submit(std::function<void()> task);

    unsigned size() const { return static_cast<unsigned>(threads_.size()); }

private:
    void work();

    std::mutex mu_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> queue_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

} // namespace jobs
