// The runtime's thread pool for host plans (issue 19). A step's blocks are cut into chunks that
// the calling thread and the pool's workers claim one at a time from a shared counter; run()
// returns when every chunk has finished. Why not an OpenMP region per kernel: a region waits for
// every thread of its team, so a thread the OS has descheduled stalls every step (a static split
// gives it half of each step's work, a dynamic one still waits for it to check in). Here the
// caller never waits for a worker to arrive: a worker that wakes after the last chunk was
// claimed finds nothing to do, and a descheduled one holds at most the chunk it is running.
//
// Idle workers spin briefly for the next job (consecutive steps follow within microseconds),
// then block on a futex: nothing spins between runs. (Raw futex calls rather than
// std::atomic::wait: libstdc++ 12's notify_all lost a wake-up of a worker blocked in wait().)
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace aicf::rt {

class ThreadPool {
public:
  // `threads` in all, the caller included: threads - 1 workers (none for 1). With `pin`, worker
  // i runs only on the (i + 1)-th CPU of the process's affinity set (wrapping around); the
  // calling thread is left as it is.
  explicit ThreadPool(int threads, bool pin = false);
  bool pinned() const { return pinned_; }
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(ctx, c) once for every chunk c in [0, chunks), on the calling thread and the
  // workers, and returns when all have returned. fn must not throw. One run at a time per pool.
  using ChunkFn = void (*)(void *ctx, int64_t chunk);
  static constexpr int64_t kMaxChunks = 0xffff;
  void run(int64_t chunks, ChunkFn fn, void *ctx);

  // Test hook: while paused, workers do not take jobs (as if the OS had descheduled them); run()
  // still completes, on the calling thread.
  void pauseWorkers(bool paused) { paused_.store(paused, std::memory_order_release); }

private:
  void work(uint32_t seen);
  void stopWorkers();
  void runChunks(uint32_t gen);

  // The current job, one word so that a worker's claim is one compare-and-swap that also checks
  // the job is still the one it woke for: generation (32 bits) | chunks (16) | next chunk (16).
  std::atomic<uint64_t> job_{0};
  std::atomic<uint32_t> gen_{0};     // the newest job's generation; workers wait on it (futex)
  std::atomic<uint32_t> done_{0};    // chunks of the current job that have finished (futex)
  std::atomic<int> sleepers_{0};     // workers blocked on gen_
  std::atomic<int> callerAsleep_{0}; // the caller is blocked on done_
  std::atomic<bool> stop_{false}, paused_{false};
  uint32_t lastGen_ = 0; // the caller's
  bool pinned_ = false;
  // Read by a worker only after it has claimed a chunk of the job they belong to, which cannot
  // finish (so the caller cannot replace them) before that chunk has.
  ChunkFn fn_ = nullptr;
  void *ctx_ = nullptr;
  std::vector<std::thread> workers_;
};

} // namespace aicf::rt
