// ring.cpp — the planted bug: the hand-over count is read under the lock
// but written back after it is released, so a hand-over made meanwhile by
// the next member is lost. -DFIXED counts under the lock.
#include "ring.hpp"

void Ring::pass(int member) {
    std::unique_lock<std::mutex> guard(lock_);
    turn_.wait(guard, [&] { return holder_ == member; });
    log_ += std::to_string(member);
    holder_ = (member + 1) % members_;
#ifdef FIXED
    passes_++;
    turn_.notify_all();
#else
    int seen = passes_;
    turn_.notify_all();
    guard.unlock();
    passes_ = seen + 1;
#endif
}
