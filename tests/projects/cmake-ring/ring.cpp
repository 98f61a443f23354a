// ring.cpp — the planted bug: the hand-over count is read under the lock
// but written back after the lock is released and the hand-over logged, so
// a hand-over the next member makes meanwhile is lost. -DFIXED counts
// under the lock.
#include "ring.hpp"

#include <cstdio>

void Ring::pass(int member) {
    std::unique_lock<std::mutex> guard(lock_);
    turn_.wait(guard, [&] { return holder_ == member; });
    log_ += std::to_string(member);
    holder_ = (member + 1) % members_;
#ifdef FIXED
    passes_++;
    turn_.notify_all();
    guard.unlock();
    std::printf("member %d passed the token\n", member);
#else
    int seen = passes_;
    turn_.notify_all();
    guard.unlock();
    std::printf("member %d passed the token\n", member);
    passes_ = seen + 1;
#endif
}
