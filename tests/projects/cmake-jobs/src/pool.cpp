#include "jobs/pool.hpp"

namespace jobs {

Pool::Pool(unsigned workers) {
    threads_.reserve(workers);
    for (unsigned i = 0; i < workers; i++)
        threads_.emplace_back([this] { work(); });
}

Pool::~Pool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    ready_.notify_all();
    for (auto &t : threads_)
        t.join();
}

void Pool::submit(std::function<void()> task) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(task));
    }
    ready_.notify_one();
}

void Pool::work() {
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(mu_);
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty())
                return;
            task = std::move(queue_.front());
            queue_.pop_front();
        }
        task();
    }
}

} // namespace jobs
