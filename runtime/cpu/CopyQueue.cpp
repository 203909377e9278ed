//===- CopyQueue.cpp - The CPU backend's copy queue: one thread, memcpy ---===//
//
// On the CPU "host" and "device" are the same memory, so a spilled plan's
// prefetch and spill are memcpy; they still run on a thread of their own,
// first in first out, so that a copy overlaps the kernels that run
// meanwhile as it would on a GPU's copy engine. The executor decides what
// waits for what (runtime/Executor.cpp); this only copies and counts. A
// caller that must wait for a copy the thread has not started runs it
// itself: the kernels' threads may keep the copy thread off the cores (two
// of them here), and a waiting caller has nothing else to do.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CopyQueue.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

namespace cleave::runtime::cpu {
namespace {

class ThreadCopyQueue final : public CopyQueue {
public:
  explicit ThreadCopyQueue(double delaySeconds)
      : delay_(delaySeconds), thread_([this] { loop(); }) {}

  ~ThreadCopyQueue() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_.notify_one();
    thread_.join(); // the copies issued so far finish first
  }

  uint64_t issue(void *dst, const void *src, size_t bytes, bool) override {
    uint64_t ticket;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ticket = ++issued_;
      jobs_.push_back({dst, src, bytes, ticket});
    }
    work_.notify_one();
    return ticket;
  }

  Status wait(uint64_t ticket) override {
    if (done_.load(std::memory_order_acquire) >= ticket)
      return {};
    std::unique_lock<std::mutex> lock(mutex_);
    if (ticket > issued_)
      return CLEAVE_ERROR("copy queue: waiting for copy ", ticket, ", only ", issued_,
                          " were issued");
    // Run the copies up to `ticket` that the thread has not taken; then
    // wait for the ones it is running.
    while (!jobs_.empty() && jobs_.front().ticket <= ticket) {
      Job job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      run(job);
      lock.lock();
      finish(job.ticket);
    }
    finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) >= ticket; });
    return {};
  }

  uint64_t done() const override { return done_.load(std::memory_order_acquire); }

  double busySeconds() const override {
    return static_cast<double>(busyNanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
  }

private:
  struct Job {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t ticket;
  };

  void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty())
          return; // stopping, and nothing left
        job = jobs_.front();
        jobs_.pop_front();
      }
      run(job);
      std::lock_guard<std::mutex> lock(mutex_);
      finish(job.ticket);
    }
  }

  void run(const Job &job) {
    auto start = std::chrono::steady_clock::now();
    if (delay_ > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(delay_));
    if (job.bytes)
      std::memcpy(job.dst, job.src, job.bytes);
    busyNanoseconds_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count(),
                               std::memory_order_relaxed);
  }

  /// Marks `ticket` copied (under the lock): `done_` is the last ticket
  /// whose every predecessor has finished too, whichever thread ran them.
  void finish(uint64_t ticket) {
    finishedOutOfOrder_.insert(ticket);
    uint64_t done = done_.load(std::memory_order_relaxed);
    while (finishedOutOfOrder_.erase(done + 1))
      ++done;
    done_.store(done, std::memory_order_release);
    finished_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable work_, finished_;
  std::deque<Job> jobs_;
  std::set<uint64_t> finishedOutOfOrder_;
  uint64_t issued_ = 0;
  bool stopping_ = false;
  std::atomic<uint64_t> done_{0};
  std::atomic<int64_t> busyNanoseconds_{0};
  const double delay_;
  std::thread thread_; // last: starts once the members above exist
};

} // namespace

std::unique_ptr<CopyQueue> createThreadCopyQueue(double delaySeconds) {
  return std::make_unique<ThreadCopyQueue>(delaySeconds);
}

} // namespace cleave::runtime::cpu
