// jobs/batch.hpp — a group of tasks run on a pool; wait() returns when all
// are done and rethrows, as a batch_error, what they threw.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "jobs/pool.hpp"

namespace jobs {

/// What Batch::wait throws when tasks failed: the first failure (as an
/// exception_ptr, to rethrow) and how many tasks failed.
class batch_error : public std::runtime_error {
public:
    batch_error(std::exception_ptr first, std::size_t failed);
    std::exception_ptr first() const noexcept { return first_; }
    std::size_t failed() const noexcept { return failed_; }

private:
    std::exception_ptr first_;
    std::size_t failed_;
};

class Batch {
public:
    explicit Batch(Pool &pool) : pool_(pool) {}
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;

    template <class F> void run(F f) {
        started();
        pool_.submit([this, f]() mutable { execute(std::function<void()>(std::move(f))); });
    }

    /// Blocks until every task ran; throws batch_error if any threw.
    void wait();

    std::size_t done() const { return done_; }

private:
    void started();
    void execute(std::function<void()> task);
    void record(std::exception_ptr e);
    void finished();

    Pool &pool_;
    std::mutex mu_;
    std::condition_variable idle_;
    std::size_t pending_ = 0;
    std::size_t done_ = 0;
    std::size_t failed_ = 0;
    std::exception_ptr first_;
};

/// v[i], or std::out_of_range naming the index.
template <class T> const T &checked(const std::vector<T> &v, std::size_t i) {
    return v.at(i);
}

} // namespace jobs
