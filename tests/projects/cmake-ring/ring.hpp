// ring.hpp — a token passed around a ring of threads.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

class Ring {
  public:
    explicit Ring(int members) : members_(members) {}

    // Blocks until the token is at `member`, then hands it to the next one.
    void pass(int member);

    // How many hand-overs happened, and who held the token, in order.
    int passes() const { return passes_; }
    const std::string &log() const { return log_; }

  private:
    const int members_;
    int holder_ = 0;
    int passes_ = 0;
    std::string log_;
    std::mutex lock_;
    std::condition_variable turn_;
};
