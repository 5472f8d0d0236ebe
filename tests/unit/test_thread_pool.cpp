// The runtime's thread pool (runtime/thread_pool.h): every chunk runs exactly once per run, on
// the caller and the workers; a run completes on the calling thread alone when the workers take
// no part (as if the OS had descheduled them: the property that keeps a contended machine from
// stalling every step); and consecutive runs of different sizes do not mix their chunks.
#include "runtime/thread_pool.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using aicf::rt::ThreadPool;

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> onOtherThreads{0};
  std::thread::id caller = std::this_thread::get_id();
  explicit Counts(size_t n) : hits(n) {}
  static void chunk(void *self, int64_t c) {
    auto &s = *static_cast<Counts *>(self);
    s.hits[size_t(c)].fetch_add(1);
    if (std::this_thread::get_id() != s.caller)
      s.onOtherThreads.fetch_add(1);
    // A little work, so that the workers get a share.
    volatile double x = 0;
    for (int i = 0; i < 2000; ++i)
      x = x + i;
  }
};

void checkOnce(const Counts &c) {
  for (size_t i = 0; i < c.hits.size(); ++i) {
    CAPTURE(i);
    REQUIRE(c.hits[i].load() == 1);
  }
}

} // namespace

TEST_CASE("thread pool: every chunk runs exactly once, on the caller and the workers") {
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    CHECK(pool.threads() == threads);
    int shared = 0;
    for (int64_t chunks :
         {int64_t(1), int64_t(2), int64_t(3), int64_t(17), int64_t(1000), ThreadPool::kMaxChunks}) {
      CAPTURE(chunks);
      Counts c{size_t(chunks)};
      pool.run(chunks, &Counts::chunk, &c);
      checkOnce(c);
      shared += c.onOtherThreads.load();
    }
    if (threads == 1)
      CHECK(shared == 0);
    // (With workers, whether they took part depends on the scheduler: not asserted.)
  }
}

TEST_CASE("thread pool: a run completes on the caller alone while the workers take no part") {
  ThreadPool pool(4);
  pool.pauseWorkers(true);
  Counts c(500);
  pool.run(500, &Counts::chunk, &c);
  checkOnce(c);
  CHECK(c.onOtherThreads.load() == 0);
  // Then the workers come back and take part again in later runs.
  pool.pauseWorkers(false);
  for (int r = 0; r < 20; ++r) {
    Counts d(64);
    pool.run(64, &Counts::chunk, &d);
    checkOnce(d);
  }
}

TEST_CASE("thread pool: many back-to-back runs of different sizes keep their chunks apart") {
  ThreadPool pool(3);
  for (int r = 0; r < 2000; ++r) {
    int64_t chunks = 1 + (r * 7) % 40;
    Counts c{size_t(chunks)};
    pool.run(chunks, &Counts::chunk, &c);
    checkOnce(c);
  }
}

// A pool destroyed before its workers have started (a model opened, run once and closed at
// once) must still stop them: each worker starts from the generation of the pool's creation.
TEST_CASE("thread pool: destroyed right after creation or after one run, it stops its workers") {
  for (int r = 0; r < 300; ++r) {
    ThreadPool pool(1 + r % 4);
    if (r % 2) {
      Counts c{8};
      pool.run(8, &Counts::chunk, &c);
      checkOnce(c);
    }
  }
}

// Pinned workers (aicf_set_thread_affinity) run the same chunks.
TEST_CASE("thread pool: pinned workers run every chunk exactly once") {
  ThreadPool pool(3, /*pin=*/true);
  CHECK(pool.pinned());
  for (int r = 0; r < 50; ++r) {
    Counts c{100};
    pool.run(100, &Counts::chunk, &c);
    checkOnce(c);
  }
}

// TeamPolicy, driven with given times (ns): what shrinks the team, for how long, and how the
// back-off grows while stalls persist and resets once a whole window runs clean.
TEST_CASE("thread pool: the team policy shrinks on stalls, restores after the back-off") {
  using aicf::rt::TeamPolicy;
  constexpr int64_t ms = 1'000'000, us = 1'000;
  TeamPolicy p(3); // defaults: grace 30 us, 1 ms and 10% of time, window 100 ms, back-off 50 ms+
  int64_t t = 0;
  CHECK(p.active(t) == 3);
  // Waits explained by the chunks' size (and the grace) never count, however many there are.
  for (int i = 0; i < 1000; ++i)
    p.observe(t += 200 * us, 200 * us, 60 * us, 20 * us);
  CHECK(p.active(t) == 3);
  // Stalls under 10% of the time run do not shrink the team either ...
  for (int i = 0; i < 40; ++i)
    p.observe(t += 1 * ms, 1 * ms, 20 * us + 50 * us, 10 * us); // 40 us stall each: 4%
  CHECK(p.active(t) == 3);
  // ... stalls of 2 ms in 5 ms runs do, once they are 10% of the (decaying) time run: half the
  // workers (rounded down), for the back-off.
  int runs = 0;
  while (p.active(t) == 3 && runs < 20) {
    p.observe(t += 5 * ms, 5 * ms, 2 * ms + 50 * us, 10 * us);
    ++runs;
  }
  CHECK(runs > 1); // one stall was not 10% of the time run so far
  CHECK(runs < 10);
  CHECK(p.active(t) == 1);
  CHECK(p.backoffNs() == 100 * ms); // doubled for the next time
  CHECK(p.active(t + 49 * ms) == 1);
  // Persisting stalls shrink it further, to none (and double the back-off again).
  p.observe(t += 5 * ms, 5 * ms, 3 * ms, 10 * us);
  CHECK(p.active(t) == 0);
  CHECK(p.backoffNs() == 200 * ms);
  // Time up: the whole team again; a stall at once (the sums restart) shrinks it for 200 ms.
  t += 100 * ms;
  CHECK(p.active(t) == 3);
  p.observe(t += 4 * ms, 4 * ms, 2 * ms, 10 * us);
  CHECK(p.active(t) == 1);
  CHECK(p.active(t + 199 * ms) == 1);
  CHECK(p.active(t + 200 * ms) == 3);
  t += 200 * ms;
  // A clean window with the whole team resets the back-off to its minimum.
  for (int i = 0; i < 120; ++i) {
    REQUIRE(p.active(t) == 3);
    p.observe(t += 1 * ms, 1 * ms, 10 * us, 10 * us);
  }
  CHECK(p.backoffNs() == 50 * ms);
  // The back-off never grows past its maximum (2 s).
  for (int i = 0; i < 20; ++i) {
    t += 3'000 * ms;
    REQUIRE(p.active(t) == 3);
    p.observe(t += 4 * ms, 4 * ms, 2 * ms, 10 * us);
  }
  CHECK(p.backoffNs() == 2'000 * ms);
}

// The pool itself: a worker that holds its chunk for milliseconds (as one the OS descheduled
// would) shrinks the team; runs then complete on the caller alone, and the workers come back
// once the back-off is over (shortened here).
TEST_CASE("thread pool: workers that stall runs are left out for a while, then used again") {
  struct Slow {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> onWorkers{0};
    static void chunk(void *self, int64_t) {
      auto &s = *static_cast<Slow *>(self);
      if (std::this_thread::get_id() != s.caller) {
        s.onWorkers.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      }
    }
  };
  aicf::rt::TeamPolicy::Params params;
  params.backoffMinNs = 30'000'000; // 30 ms
  ThreadPool pool(2, false, true, params);
  CHECK(pool.adaptive());
  CHECK(pool.activeWorkers() == 1);
  Slow s;
  for (int r = 0; r < 200 && pool.activeWorkers() == 1; ++r)
    pool.run(64, &Slow::chunk, &s);
  REQUIRE(s.onWorkers.load() > 0);
  CHECK(pool.activeWorkers() == 0);
  // While the team is shrunk, the caller runs every chunk.
  Counts c(300);
  pool.run(300, &Counts::chunk, &c);
  checkOnce(c);
  CHECK(c.onOtherThreads.load() == 0);
  // After the back-off, runs have the whole team again. (A run on a loaded machine may itself
  // see a stall and shrink the team anew: a few tries.)
  for (int r = 0; r < 20 && pool.activeWorkers() == 0; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    Counts d(300);
    pool.run(300, &Counts::chunk, &d);
    checkOnce(d);
  }
  CHECK(pool.activeWorkers() == 1);

  // A fixed pool (adaptive = false) keeps every worker, stalls or not.
  ThreadPool fixed(2, false, false);
  CHECK_FALSE(fixed.adaptive());
  Slow f;
  for (int r = 0; r < 20; ++r)
    fixed.run(64, &Slow::chunk, &f);
  CHECK(fixed.activeWorkers() == 1);
}
