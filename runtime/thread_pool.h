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
//
// Spinning pays only while the thread waited for runs on another CPU. The OS sometimes wakes a
// worker onto the CPU of the caller that posted the job (the other one idle): the worker then
// holds the CPU for its whole spin while the caller it took it from waits for nothing, and the
// caller, spinning for a chunk the worker holds, delays it the same way. Measured on a 2-core VM,
// 2 chunks of 10 us after a 1 ms pause between runs: 15% of the runs took 50 us longer (the
// spin). So each thread notes the CPU it runs on, and a thread that shares its CPU with the one
// it waits for blocks at once.
//
// A descheduled worker still stalls the step whose chunk it holds, for up to the OS's time
// slice (milliseconds, against chunks of ~10 us). On a machine shared with busy processes that
// can happen on most steps, and then fewer threads run the model faster; or the scheduler may
// still give the whole team enough CPU that it wins despite the stalls. Which one holds is
// measured, not guessed (TeamPolicy): when stalls add up to a real share of the time, the next
// runs try half the workers (none, for two threads), and the team whose runs were faster is kept
// for a while; then the other is tried again, backing off exponentially while the choice stands.
// An idle machine sees no stalls and never pays for a trial, unless its runs are so short that
// a trial costs next to nothing (TeamPolicy).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace aicf::rt {

// How many of a pool's workers take part in each run. Pure (times are given, in nanoseconds) so
// that tests can drive it. Per dispatch it sums the stalls (observe); per run (beginRun /
// endRun) it picks the team: the steady choice, or a trial of the other team, whose mean run
// time is compared with the steady team's over as many recent runs. A trial is trialRuns long,
// or more for short runs (enough to last trialMinNs, up to maxTrialRuns): the mean of five
// 40 us runs is one interrupt away from a wrong choice.
//
// Stalls start a trial of the small team. So does nothing, for runs so short that a trial costs
// at most exploreShare of the hold (in effect runs under 0.2 ms): waking a worker costs about as
// much as such a model's steps gain from it, it depends on the machine, and short runs leave too
// little time for stalls to add up to evidence.
class TeamPolicy {
public:
  struct Params {
    int64_t graceNs = 30'000;       // of a wait beyond twice the caller's mean chunk time
    int64_t minStallNs = 1'000'000; // stalls below this never start a trial
    double stallShare = 0.10;       // ... nor stalls below this share of the time dispatched
    int64_t windowNs = 100'000'000; // the stall sums decay (halve) past this much time
    int trialRuns = 5;
    int64_t trialMinNs = 1'000'000; // a trial of short runs lasts this long ...
    int maxTrialRuns = 64;          // ... but no more runs than this
    double exploreShare = 0.01;     // a trial without stalls costs at most this share of the hold
    double keepFull = 0.95;         // the smaller team must be this much faster (mean) to be chosen
    int64_t holdMinNs = 100'000'000, holdMaxNs = 2'000'000'000; // a choice stands this long
  };
  TeamPolicy(int workers, Params p)
      : p_(p), full_(workers), small_(workers / 2), team_(workers),
        recent_(size_t(std::max(p.trialRuns, p.maxTrialRuns))), hold_(p.holdMinNs) {}
  explicit TeamPolicy(int workers) : TeamPolicy(workers, Params{}) {}

  // The workers for the run starting at time now.
  int beginRun(int64_t now);
  // That run ended at time now, runNs long.
  void endRun(int64_t now, int64_t runNs);
  // One dispatch, ranNs long, after which the caller (once it found no chunk left to claim)
  // waited waitNs for the workers' last chunks; its own chunks took meanChunkNs on average.
  // The wait beyond twice that (plus a grace) is a stall: a worker that was not running while
  // it held a chunk.
  void observe(int64_t ranNs, int64_t waitNs, int64_t meanChunkNs);

  int full() const { return full_; }
  int team() const { return team_; } // the steady choice
  bool trying() const { return trialLeft_ > 0; }
  int64_t holdNs() const { return hold_; }

private:
  // Mean of the steady team's last n runs, or -1 while fewer have run.
  double recentMean(int n) const;
  // How many runs a trial takes, from the steady team's recent runs (0 while too few have run).
  int trialLength() const;
  void startTrial(int team, int runs);
  void decide(int64_t now);
  Params p_;
  int full_, small_, team_;
  int trialTeam_ = 0, trialLeft_ = 0, trialLen_ = 0;
  int64_t trialSum_ = 0;
  std::vector<int64_t> recent_; // a ring of the steady team's last runs
  size_t recentNext_ = 0, recentCount_ = 0;
  int64_t stallSum_ = 0, timeSum_ = 0;
  int64_t hold_, until_ = 0; // no trial before until_
};

class ThreadPool {
public:
  // `threads` in all, the caller included: threads - 1 workers (none for 1). With `pin`, worker
  // i runs only on the (i + 1)-th CPU of the process's affinity set (wrapping around); the
  // calling thread is left as it is.
  // With `adaptive`, a TeamPolicy shrinks the team while workers stall runs (see above).
  explicit ThreadPool(int threads, bool pin = false, bool adaptive = true,
                      TeamPolicy::Params params = {});
  bool pinned() const { return pinned_; }
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  bool adaptive() const { return adaptive_; }
  // The workers that take part (threads() - 1 unless the policy chose fewer).
  int activeWorkers() const { return active_.load(std::memory_order_relaxed); }
  // Around each run of a model (a sequence of run() calls): the adaptive pool picks its team at
  // the start and times the run at the end. Without them the team stays whole.
  void beginRun();
  void endRun();

  // Calls fn(ctx, c) once for every chunk c in [0, chunks), on the calling thread and the
  // workers, and returns when all have returned. fn must not throw. One run at a time per pool.
  using ChunkFn = void (*)(void *ctx, int64_t chunk);
  static constexpr int64_t kMaxChunks = 0xffff;
  void run(int64_t chunks, ChunkFn fn, void *ctx);

  // Test hook: while paused, workers do not take jobs (as if the OS had descheduled them); run()
  // still completes, on the calling thread.
  void pauseWorkers(bool paused) { paused_.store(paused, std::memory_order_release); }

private:
  void work(int index, uint32_t seen);
  void stopWorkers();
  int64_t runChunks(uint32_t gen); // returns how many chunks this thread ran
  void setActive(int n);

  // The current job, one word so that a worker's claim is one compare-and-swap that also checks
  // the job is still the one it woke for: generation (32 bits) | chunks (16) | next chunk (16).
  std::atomic<uint64_t> job_{0};
  std::atomic<uint32_t> gen_{0};     // the newest job's generation; workers wait on it (futex)
  std::atomic<uint32_t> done_{0};    // chunks of the current job that have finished (futex)
  std::atomic<int> sleepers_{0};     // workers blocked on gen_
  std::atomic<int> callerAsleep_{0}; // the caller is blocked on done_
  std::atomic<bool> stop_{false}, paused_{false};
  std::atomic<int> active_{0};    // workers 1..active_ take jobs; the others wait on park_
  std::atomic<uint32_t> park_{0}; // changes when the team grows or the pool stops (futex)
  // The CPU each thread last ran on (sched_getcpu when it last looked for work): [0] the caller,
  // [i] worker i. A hint for whether to spin; stale values cost only a spin or a block.
  std::unique_ptr<std::atomic<int>[]> cpuOf_;
  uint32_t lastGen_ = 0; // the caller's
  bool pinned_ = false, adaptive_ = true;
  TeamPolicy policy_;
  int64_t runStart_ = 0;
  // Read by a worker only after it has claimed a chunk of the job they belong to, which cannot
  // finish (so the caller cannot replace them) before that chunk has.
  ChunkFn fn_ = nullptr;
  void *ctx_ = nullptr;
  std::vector<std::thread> workers_;
};

} // namespace aicf::rt
