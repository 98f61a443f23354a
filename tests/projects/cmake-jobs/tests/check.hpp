// A small test helper: CHECK prints where it failed and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);  \
            std::abort();                                                                  \
        }                                                                                  \
    } while (0)

template <class E, class F> bool throws(F f) {
    try {
        f();
    } catch (const E &) {
        return true;
    }
    return false;
}
