// tc_cxx_threads.cpp — the C++ thread library under heddle: std::thread,
// std::mutex, std::condition_variable, std::atomic, std::string and
// std::cout (libc++ built with threads).
//
// Two producers push numbered items into a std::string-carrying queue
// guarded by a std::mutex; two consumers wait on a std::condition_variable,
// pop items, and count them.
//
// Bug: each consumer counts into `consumed`, a plain int, with a split
//      read-modify-write: it reads the count, then takes the log mutex to
//      record the item, then writes count + 1. Another consumer can count in
//      between, and one of the two updates is lost; main's heddle::check
//      ("lost update on consumed") fails.
//
// -DFIXED: the count is updated inside the queue's critical section.
//
// Output (std::cout, from main after the joins): `consumed 6 of 6 items,
// checksum 21`.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "heddle.hpp"

static constexpr int PRODUCERS = 2;
static constexpr int ITEMS_PER_PRODUCER = 3;
static constexpr int TOTAL = PRODUCERS * ITEMS_PER_PRODUCER;

static std::mutex queue_lock;
static std::condition_variable queue_ready;
static std::deque<std::string> queue;
static int taken = 0; // guarded by queue_lock

static std::mutex log_lock;
static std::string log_text; // guarded by log_lock

static std::atomic<int> checksum{0};
static int consumed = 0; // the planted race (unless FIXED)

static void producer(int id) {
    for (int i = 0; i < ITEMS_PER_PRODUCER; i++) {
        std::string item = "item-" + std::to_string(id * ITEMS_PER_PRODUCER + i + 1);
        {
            std::lock_guard<std::mutex> g(queue_lock);
            queue.push_back(std::move(item));
        }
        queue_ready.notify_one();
    }
}

static void consumer() {
    for (;;) {
        std::string item;
        {
            std::unique_lock<std::mutex> l(queue_lock);
            queue_ready.wait(l, [] { return !queue.empty() || taken == TOTAL; });
            if (queue.empty())
                return;
            item = std::move(queue.front());
            queue.pop_front();
            taken++;
#ifdef FIXED
            consumed++;
#endif
            if (taken == TOTAL)
                queue_ready.notify_all();
        }
        checksum.fetch_add(std::stoi(item.substr(5)), std::memory_order_relaxed);
#ifndef FIXED
        int seen = consumed; // read ...
#endif
        {
            std::lock_guard<std::mutex> g(log_lock);
            log_text += item;
            log_text += ' ';
        }
#ifndef FIXED
        consumed = seen + 1; // ... and write back: an update in between is lost
#endif
    }
}

int main() {
    std::vector<std::thread> threads;
    for (int p = 0; p < PRODUCERS; p++)
        threads.emplace_back(producer, p);
    for (int c = 0; c < 2; c++)
        threads.emplace_back(consumer);
    for (auto &t : threads)
        t.join();
    heddle::check(checksum.load() == TOTAL * (TOTAL + 1) / 2, "checksum");
    heddle::check(consumed == TOTAL, "lost update on consumed");
    std::cout << "consumed " << consumed << " of " << TOTAL << " items, checksum "
              << checksum.load() << std::endl;
    return 0;
}
