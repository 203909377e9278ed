//===- CopyQueue.cpp - The CPU backend's copy queue: one thread, memcpy ---===//
//
// On the CPU "host" and "device" are the same memory, so a spilled plan's
// prefetch and spill are memcpy; they still run on a thread of their own,
// first in first out, so that a copy overlaps the kernels that run
// meanwhile as it would on a GPU's copy engine. The executor decides what
// waits for what (runtime/Executor.cpp); this only copies and counts. A
// caller that must wait for a copy the thread has not started runs it
// itself: the kernels' threads may keep the copy thread off the cores (two
// of them here), and a waiting caller has nothing else to do. Either way
// one copy runs at a time, in issue order: the executor counts on it (a
// copy never waits for the copies before it).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CopyQueue.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
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
    // Run the next copy whenever none is running (the thread may not get
    // a core), else wait for the one that is: never two at once, never
    // out of order.
    while (done_.load(std::memory_order_acquire) < ticket) {
      if (!running_ && !jobs_.empty())
        runFront(lock);
      else
        finished_.wait(lock);
    }
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
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return (!jobs_.empty() && !running_) || (stopping_ && jobs_.empty()); });
      if (jobs_.empty())
        return; // stopping, and nothing left
      runFront(lock);
    }
  }

  /// Runs the first queued copy; `lock` is held on entry and on return,
  /// released while copying. Only one caller at a time gets here with a
  /// copy to run (`running_`), so copies finish in ticket order.
  void runFront(std::unique_lock<std::mutex> &lock) {
    Job job = jobs_.front();
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    auto start = std::chrono::steady_clock::now();
    if (delay_ > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(delay_));
    if (job.bytes)
      std::memcpy(job.dst, job.src, job.bytes);
    busyNanoseconds_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count(),
                               std::memory_order_relaxed);
    lock.lock();
    running_ = false;
    done_.store(job.ticket, std::memory_order_release);
    finished_.notify_all();
    work_.notify_one(); // the thread, if a waiting caller ran this one
  }

  std::mutex mutex_;
  std::condition_variable work_, finished_;
  std::deque<Job> jobs_;
  bool running_ = false; // a copy is running, on the thread or a waiting caller
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
