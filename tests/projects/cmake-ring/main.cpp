// main.cpp — three threads pass the token around the ring twice.
#include <cassert>
#include <iostream>
#include <thread>
#include <vector>

#include "ring.hpp"

int main() {
    const int members = 3, rounds = 2;
    Ring ring(members);
    std::vector<std::thread> threads;
    for (int m = 0; m < members; m++)
        threads.emplace_back([&ring, m] {
            for (int r = 0; r < rounds; r++)
                ring.pass(m);
        });
    for (auto &t : threads)
        t.join();
    std::cout << "passes " << ring.passes() << " order " << ring.log() << std::endl;
    assert(ring.passes() == members * rounds);
    return 0;
}
