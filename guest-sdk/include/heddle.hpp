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

// Always inlined, so that a failing check is reported at the caller's line.
#define HEDDLE_INLINE inline __attribute__((always_inline))

namespace heddle {
HEDDLE_INLINE void check(bool cond, const char *msg) { heddle_assert(cond ? 1 : 0, msg); }
HEDDLE_INLINE void fail(const char *msg) { heddle_fail(msg); }
HEDDLE_INLINE void yield() { heddle_yield(); }
HEDDLE_INLINE void event(const char *name) { heddle_event(name); }
HEDDLE_INLINE void thread_name(const char *name) { heddle_thread_name(name); }
HEDDLE_INLINE unsigned choose(unsigned n) { return heddle_choose(n); }
} // namespace heddle

#undef HEDDLE_INLINE

#endif
