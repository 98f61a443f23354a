#include "jobs/batch.hpp"

#include <string>

namespace jobs {

batch_error::batch_error(std::exception_ptr first, std::size_t failed)
    : std::runtime_error(std::to_string(failed) + " task(s) failed"), first_(std::move(first)),
      failed_(failed) {}

void Batch::started() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
}

void Batch::execute(std::function<void()> task) {
    try {
        task();
    } catch (...) {
        record(std::current_exception());
    }
    finished();
}

void Batch::record(std::exception_ptr e) {
    // Failures are rare, so this path was left without the lock: only the
    // first one is kept anyway.
#ifdef FIXED
    std::lock_guard<std::mutex> lock(mu_);
#endif
    if (!first_)
        first_ = std::move(e);
    ++failed_;
}

void Batch::finished() {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    if (--pending_ == 0)
        idle_.notify_all();
}

void Batch::wait() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return pending_ == 0; });
    if (first_) {
        batch_error err(first_, failed_);
        first_ = nullptr;
        failed_ = 0;
        throw err;
    }
}

} // namespace jobs
