// drain_cas.cpp — a lock-free tally with std::atomic and
// compare_exchange_strong, the way a small C++ library writes one: adders
// add with a CAS loop, a drainer takes the total and resets it. The bug:
// drain() loads and then stores 0, so an add between the two is lost
// (-DFIXED: exchange). benches/runs-to-bug.sh checks it is found as soon at
// -O0, where every std::atomic operation is a call into libc++, as at -O2.
#include <atomic>
#include <cassert>
#include <iostream>
#include <thread>
#include <vector>

template <typename T>
class Tally {
  std::atomic<T> value{0};
  std::atomic<T> adds{0};

 public:
  void add(T d) {
    T expected = value.load();
    while (!value.compare_exchange_strong(expected, expected + d)) {
    }
    adds.fetch_add(1);
  }
  T drain() {
#ifdef FIXED
    return value.exchange(0);
#else
    T v = value.load();
    value.store(0);
    return v;
#endif
  }
  T left() const { return value.load(); }
};

static Tally<long> tally;

static void adder(int n) {
  for (int i = 0; i < n; i++) tally.add(1);
}

int main() {
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; i++) ts.emplace_back(adder, 5);
  long drained = 0;
  for (int i = 0; i < 3; i++) drained += tally.drain();
  for (auto &t : ts) t.join();
  drained += tally.drain();
  std::cout << "drained " << drained << std::endl;
  assert(drained == 15);
  return 0;
}
