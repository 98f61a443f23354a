// cxx_exceptions.cpp — C++ exceptions under heddle: thrown across frames,
// caught in main and in worker threads, carried between threads in a
// std::exception_ptr, and unwinding through a std::lock_guard.
//
// main: a helper throws std::runtime_error three frames down; std::vector::at
// throws std::out_of_range. Two workers each try to withdraw more than an
// account holds, twice: `withdraw` throws the program's own `Overdraft`
// while holding the account's mutex (the lock_guard releases it as the
// exception unwinds, or the next withdrawal would deadlock), and the worker
// catches it and counts the rejection. Each worker then parses a bad amount
// and keeps the exception (std::runtime_error or std::invalid_argument from
// std::stoi) in a std::exception_ptr, which main rethrows after the joins.
//
// Bug: the handler counts the rejection (`rejected = rejected + 1`) after
//      the lock was released by the unwinding, without taking it again: two
//      workers' handlers can interleave and one update is lost; main's check
//      ("lost update on rejected") fails.
//
// -DFIXED: the handler counts under the account's mutex.
// -DUNCAUGHT: a third worker throws an Overdraft nobody catches: the run
//      fails naming the type (`uncaught C++ exception of type Overdraft`).
// -DUNCAUGHT_IN_MAIN: main rethrows worker 0's exception_ptr outside any
//      try: `uncaught C++ exception of type std::runtime_error: empty
//      amount`.
//
// Output (from main after the joins): `rejected 4 of 4, balance 10`.
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "heddle.hpp"

struct Overdraft : std::exception {
    int wanted;
    explicit Overdraft(int w) : wanted(w) {}
    const char *what() const noexcept override { return "overdraft"; }
};

class Account {
  public:
    std::mutex m;
    int rejected = 0; // guarded by m (unless the bug)

    void deposit(int amount) {
        std::lock_guard<std::mutex> g(m);
        balance_ += amount;
    }

    void withdraw(int amount) {
        std::lock_guard<std::mutex> g(m);
        if (amount > balance_)
            throw Overdraft(amount); // unwinding unlocks m
        balance_ -= amount;
    }

    int balance() {
        std::lock_guard<std::mutex> g(m);
        return balance_;
    }

  private:
    int balance_ = 0;
};

static int parse_digits(const std::string &s) {
    if (s.empty())
        throw std::runtime_error("empty amount");
    return std::stoi(s); // std::invalid_argument when s has no digits
}

static int parse_amount(const std::string &s) { return parse_digits(s) * 100; }

static int parse_field(const std::string &line) { return parse_amount(line.substr(0, line.find(','))); }

static void worker(Account &acct, int id, std::exception_ptr &error) {
    for (int i = 0; i < 2; i++) {
        try {
            acct.withdraw(1000);
        } catch (const Overdraft &o) {
#ifdef FIXED
            std::lock_guard<std::mutex> g(acct.m);
#endif
            int seen = acct.rejected;
            acct.rejected = seen + (o.wanted == 1000 ? 1 : 0);
        }
    }
    try {
        parse_field(id == 0 ? "" : "x,1");
    } catch (...) {
        error = std::current_exception();
    }
}

#ifdef UNCAUGHT
static void careless(Account &acct) { acct.withdraw(5000); }
#endif

int main() {
    try {
        parse_field(",2");
        heddle::check(false, "parse_field must throw");
    } catch (const std::runtime_error &e) {
        heddle::check(std::string(e.what()) == "empty amount", "runtime_error's message");
    }

    std::vector<int> v(3);
    bool out_of_range = false;
    try {
        v.at(5) = 1;
    } catch (const std::out_of_range &) {
        out_of_range = true;
    }
    heddle::check(out_of_range, "vector::at must throw out_of_range");

    Account acct;
    acct.deposit(10);
    std::exception_ptr errors[2];
    std::vector<std::thread> threads;
    for (int id = 0; id < 2; id++)
        threads.emplace_back(worker, std::ref(acct), id, std::ref(errors[id]));
#ifdef UNCAUGHT
    threads.emplace_back(careless, std::ref(acct));
#endif
    for (auto &t : threads)
        t.join();

#ifdef UNCAUGHT_IN_MAIN
    std::rethrow_exception(errors[0]); // nobody catches it
#endif
    int kinds = 0;
    for (auto &e : errors) {
        try {
            if (e)
                std::rethrow_exception(e);
        } catch (const std::invalid_argument &) {
            kinds |= 2;
        } catch (const std::runtime_error &) {
            kinds |= 1;
        }
    }
    heddle::check(kinds == 3, "each worker's exception reaches main");
    heddle::check(acct.rejected == 4, "lost update on rejected");
    std::printf("rejected %d of 4, balance %d\n", acct.rejected, acct.balance());
    return 0;
}
