// names.cpp — a C++ method, a template instance, a lambda and a function in
// a namespace: `heddle sites` must show their demangled names.
#include <pthread.h>

int shared;

namespace bank {
struct Account {
    int balance;
    __attribute__((noinline)) void deposit(int n) { balance += n; }
};
template <typename T> __attribute__((noinline)) void add(T n) { shared += static_cast<int>(n); }
__attribute__((noinline)) void q() { shared += 7; }
} // namespace bank

bank::Account account;

int main() {
    auto worker = [](void *arg) -> void * {
        account.deposit(1);
        bank::add<long>(2);
        bank::q();
        return arg;
    };
    pthread_t t;
    pthread_create(&t, nullptr, +worker, nullptr);
    account.deposit(3);
    pthread_join(t, nullptr);
    return 0;
}
