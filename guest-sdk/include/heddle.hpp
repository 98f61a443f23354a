// heddle.hpp — C++ conveniences over heddle.h.
//
//   heddle::check(cond, "msg");        // heddle_assert
//   heddle::fail("msg");               // heddle_fail
//   heddle::yield();                   // explicit yield point
//   heddle::event("name");             // named event for plans
//   heddle::thread_name("worker");     // name the calling thread
//   unsigned i = heddle::choose(3);    // controlled choice in [0, 3)
#ifndef HEDDLE_HPP
#define HEDDLE_HPP

#include "heddle.h"

namespace heddle {
inline void check(bool cond, const char *msg) { heddle_assert(cond ? 1 : 0, msg); }
inline void fail(const char *msg) { heddle_fail(msg); }
inline void yield() { heddle_yield(); }
inline void event(const char *name) { heddle_event(name); }
inline void thread_name(const char *name) { heddle_thread_name(name); }
inline unsigned choose(unsigned n) { return heddle_choose(n); }
} // namespace heddle

#endif
