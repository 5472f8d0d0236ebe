// See thread_pool.h.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace aicf::rt {

namespace {

constexpr uint64_t pack(uint32_t gen, int64_t chunks, int64_t next) {
  return (uint64_t(gen) << 32) | (uint64_t(chunks) << 16) | uint64_t(next);
}
constexpr uint32_t genOf(uint64_t w) {
  return uint32_t(w >> 32);
}
constexpr int64_t chunksOf(uint64_t w) {
  return int64_t((w >> 16) & 0xffff);
}
constexpr int64_t nextOf(uint64_t w) {
  return int64_t(w & 0xffff);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Blocks while *word == expected (returns at once if it differs: the kernel compares under its
// lock, so a change made before the call is never missed); wakes every thread blocked on word.
void futexWait(std::atomic<uint32_t> &word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futexWakeAll(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// How long an idle worker, and a caller waiting for the last chunks, spin before blocking:
// consecutive steps of a run follow each other within microseconds.
constexpr auto kSpin = std::chrono::microseconds(50), kNoSpin = std::chrono::microseconds(0);

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

double TeamPolicy::recentMean(int n) const {
  if (n <= 0 || recentCount_ < size_t(n))
    return -1;
  int64_t sum = 0;
  for (int i = 1; i <= n; ++i)
    sum += recent_[(recentNext_ + recent_.size() - size_t(i)) % recent_.size()];
  return double(sum) / n;
}

int TeamPolicy::trialLength() const {
  double mean = recentMean(p_.trialRuns);
  if (mean < 0)
    return 0;
  int64_t runs = int64_t(std::ceil(double(p_.trialMinNs) / std::max(mean, 1.0)));
  int n = int(std::clamp<int64_t>(runs, p_.trialRuns, int64_t(recent_.size())));
  return recentCount_ >= size_t(n) ? n : 0;
}

void TeamPolicy::startTrial(int team, int runs) {
  trialTeam_ = team;
  trialLeft_ = trialLen_ = runs;
  trialSum_ = 0;
}

int TeamPolicy::beginRun(int64_t now) {
  if (trialLeft_ == 0 && team_ != full_ && now >= until_) { // the small team's time is up
    if (int n = trialLength())
      startTrial(full_, n);
  }
  return trialLeft_ > 0 ? trialTeam_ : team_;
}

void TeamPolicy::endRun(int64_t now, int64_t runNs) {
  if (trialLeft_ > 0) {
    trialSum_ += runNs;
    if (--trialLeft_ == 0)
      decide(now);
    return;
  }
  recent_[recentNext_] = runNs;
  recentNext_ = (recentNext_ + 1) % recent_.size();
  recentCount_ = std::min(recentCount_ + 1, recent_.size());
  if (team_ != full_ || small_ >= full_ || now < until_)
    return;
  int n = trialLength();
  if (n == 0)
    return;
  // The whole team stalls, or a trial is cheap enough to run on no evidence: try the small one.
  bool stalls = stallSum_ >= p_.minStallNs && double(stallSum_) >= p_.stallShare * double(timeSum_);
  bool cheap = double(n) * recentMean(n) <= p_.exploreShare * double(hold_);
  if (stalls || cheap)
    startTrial(small_, n);
}

void TeamPolicy::decide(int64_t now) {
  double trial = double(trialSum_) / trialLen_, kept = recentMean(trialLen_);
  int small = trialTeam_ == full_ ? team_ : trialTeam_;
  double smallMean = trialTeam_ == full_ ? kept : trial,
         fullMean = trialTeam_ == full_ ? trial : kept;
  int choice = smallMean < p_.keepFull * fullMean ? small : full_;
  hold_ = choice == team_ ? std::min(2 * hold_, p_.holdMaxNs) : p_.holdMinNs;
  team_ = choice;
  until_ = now + hold_;
  recentNext_ = recentCount_ = 0;
  stallSum_ = timeSum_ = 0;
}

void TeamPolicy::observe(int64_t ranNs, int64_t waitNs, int64_t meanChunkNs) {
  int64_t stall = waitNs - 2 * meanChunkNs - p_.graceNs;
  if (stall > 0)
    stallSum_ += stall;
  timeSum_ += ranNs;
  if (timeSum_ >= p_.windowNs) {
    stallSum_ /= 2;
    timeSum_ /= 2;
  }
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain 32-bit integers");

ThreadPool::ThreadPool(int threads, bool pin, bool adaptive, TeamPolicy::Params params)
    : pinned_(pin), adaptive_(adaptive), policy_(std::max(0, threads - 1), params) {
  active_.store(std::max(0, threads - 1));
  cpuOf_ = std::make_unique<std::atomic<int>[]>(size_t(std::max(1, threads)));
  for (int i = 0; i < std::max(1, threads); ++i)
    cpuOf_[i].store(-1);
  // Each worker starts from the generation of the pool's creation, not from what it reads once
  // its thread runs: a job posted, or the pool destroyed, before it starts is still a change.
  uint32_t initial = gen_.load();
  std::vector<int> cpus;
  if (pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
          cpus.push_back(c);
  }
  try {
    for (int i = 1; i < threads; ++i) {
      workers_.emplace_back([this, i, initial] { work(i, initial); });
      if (!cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[size_t(i) % cpus.size()], &one);
        pthread_setaffinity_np(workers_.back().native_handle(), sizeof one, &one);
      }
    }
  } catch (...) { // the OS refused a thread: stop the ones started, then report it
    stopWorkers();
    throw;
  }
}

ThreadPool::~ThreadPool() {
  stopWorkers();
}

void ThreadPool::stopWorkers() {
  stop_.store(true);
  gen_.fetch_add(1); // the values the workers wait on change: none can block again
  futexWakeAll(gen_);
  park_.fetch_add(1);
  futexWakeAll(park_);
  for (std::thread &t : workers_)
    t.join();
  workers_.clear();
}

int64_t ThreadPool::runChunks(uint32_t gen) {
  for (int64_t ran = 0;; ++ran) {
    uint64_t w = job_.load(std::memory_order_acquire);
    int64_t chunk = -1;
    while (genOf(w) == gen && nextOf(w) < chunksOf(w)) {
      if (job_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        chunk = nextOf(w);
        break;
      }
    }
    if (chunk < 0)
      return ran; // another job, or every chunk of this one claimed
    uint32_t total = uint32_t(chunksOf(w));
    fn_(ctx_, chunk);
    // seq_cst with the caller's callerAsleep_ store: either it sees the count, or this sees it
    // asleep and wakes it.
    if (done_.fetch_add(1) + 1 == total && callerAsleep_.load() != 0)
      futexWakeAll(done_);
  }
}

void ThreadPool::setActive(int n) {
  int was = active_.exchange(n);
  if (n > was) { // wake the parked workers; seq_cst with their active_ check, as for gen_
    park_.fetch_add(1);
    futexWakeAll(park_);
  }
}

void ThreadPool::beginRun() {
  if (!adaptive_ || workers_.empty())
    return;
  runStart_ = nowNs();
  int n = policy_.beginRun(runStart_);
  if (n != active_.load(std::memory_order_relaxed))
    setActive(n);
}

void ThreadPool::endRun() {
  if (!adaptive_ || workers_.empty())
    return;
  int64_t now = nowNs();
  policy_.endRun(now, now - runStart_);
}

void ThreadPool::work(int index, uint32_t seen) {
  for (;;) {
    if (stop_.load())
      return;
    if (index > active_.load()) { // not in the team for now: block until it grows
      uint32_t p = park_.load();
      if (index > active_.load() && !stop_.load())
        futexWait(park_, p);
      continue;
    }
    uint32_t g = gen_.load(std::memory_order_acquire);
    int cpu = sched_getcpu();
    cpuOf_[index].store(cpu, std::memory_order_relaxed);
    if (g == seen) {
      // No spin on the caller's CPU: the caller could not post the next job while this spins.
      auto until = std::chrono::steady_clock::now() +
                   (cpu >= 0 && cpu == cpuOf_[0].load(std::memory_order_relaxed) ? kNoSpin : kSpin);
      while ((g = gen_.load(std::memory_order_acquire)) == seen &&
             std::chrono::steady_clock::now() < until)
        cpuRelax();
      if (g == seen) {
        // seq_cst with the caller's gen_ store: either it sees a sleeper and wakes it, or the
        // futex sees the new generation and does not block.
        sleepers_.fetch_add(1);
        futexWait(gen_, seen);
        sleepers_.fetch_sub(1);
        continue;
      }
    }
    seen = g;
    if (stop_.load())
      return;
    if (!paused_.load(std::memory_order_acquire) && index <= active_.load())
      runChunks(g);
  }
}

void ThreadPool::run(int64_t chunks, ChunkFn fn, void *ctx) {
  if (chunks <= 0)
    return;
  if (active_.load(std::memory_order_relaxed) == 0 || chunks == 1 || chunks > kMaxChunks) {
    for (int64_t c = 0; c < chunks; ++c)
      fn(ctx, c);
    return;
  }
  int cpu = sched_getcpu();
  cpuOf_[0].store(cpu, std::memory_order_relaxed);
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  uint32_t gen = ++lastGen_;
  if (gen == 0) // 0 is the pool's initial job word: never a live generation
    gen = ++lastGen_;
  job_.store(pack(gen, chunks, 0), std::memory_order_release);
  gen_.store(gen);
  if (sleepers_.load() > 0)
    futexWakeAll(gen_);
  int64_t t0 = adaptive_ ? nowNs() : 0;
  int64_t mine = runChunks(gen); // the caller works too
  int64_t t1 = adaptive_ ? nowNs() : 0;
  uint32_t total = uint32_t(chunks);
  uint32_t d = done_.load(std::memory_order_acquire);
  // No spin while a worker of the team (maybe the one holding the last chunk) shares this CPU.
  bool shared = false;
  for (int i = 1, n = active_.load(std::memory_order_relaxed); cpu >= 0 && i <= n; ++i)
    shared = shared || cpuOf_[i].load(std::memory_order_relaxed) == cpu;
  auto until = std::chrono::steady_clock::now() + (shared ? kNoSpin : kSpin);
  while (d != total && std::chrono::steady_clock::now() < until) {
    cpuRelax();
    d = done_.load(std::memory_order_acquire);
  }
  while (d != total) {
    callerAsleep_.store(1);
    d = done_.load();
    if (d != total)
      futexWait(done_, d);
    callerAsleep_.store(0);
    d = done_.load(std::memory_order_acquire);
  }
  if (adaptive_) {
    int64_t t2 = nowNs();
    // (A caller that ran no chunk has no measure of their size: no evidence of a stall.)
    policy_.observe(t2 - t0, t2 - t1, mine > 0 ? (t1 - t0) / mine : t2 - t1);
  }
}

} // namespace aicf::rt
