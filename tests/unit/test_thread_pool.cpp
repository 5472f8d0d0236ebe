// The runtime's thread pool (runtime/thread_pool.h): every chunk runs exactly once per run, on
// the caller and the workers; a run completes on the calling thread alone when the workers take
// no part (as if the OS had descheduled them: the property that keeps a contended machine from
// stalling every step); and consecutive runs of different sizes do not mix their chunks.
#include "runtime/thread_pool.h"

#include <doctest/doctest.h>

#include <sched.h>

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

// Threads that share one CPU (the OS woke a worker onto the caller's CPU; here the test confines
// the whole pool to one) block instead of spinning against each other: every run still completes
// with each chunk once, also with pauses between runs, when the workers have gone to sleep.
TEST_CASE("thread pool: a pool confined to one CPU runs every chunk exactly once") {
  cpu_set_t was, one;
  REQUIRE(sched_getaffinity(0, sizeof was, &was) == 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0); // this thread; the workers inherit it
  {
    ThreadPool pool(3);
    for (int r = 0; r < 200; ++r) {
      Counts c{size_t(2 + r % 7)};
      pool.run(int64_t(c.hits.size()), &Counts::chunk, &c);
      checkOnce(c);
      if (r % 20 == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  REQUIRE(sched_setaffinity(0, sizeof was, &was) == 0);
}

// TeamPolicy, driven with given times (ns): stalls start a trial of the small team, the faster
// team (by mean run time) is kept, a choice stands for a hold time that doubles while trials
// confirm it, and an idle machine (no stalls) never pays for a trial.
TEST_CASE("thread pool: the team policy tries the small team on stalls and keeps the faster") {
  using aicf::rt::TeamPolicy;
  constexpr int64_t ms = 1'000'000, us = 1'000;
  TeamPolicy p(3); // small team: 1 worker; 5-run trials; hold 100 ms, doubling up to 2 s
  int64_t t = 0;
  // One run: `dispatches` of 1 ms, each with `stallUs` of stall beyond the chunks' size.
  auto run = [&](int64_t runNs, int64_t stallUs = 0, int dispatches = 4) {
    int team = p.beginRun(t);
    for (int d = 0; d < dispatches; ++d)
      p.observe(1 * ms, 10 * us + 30 * us + stallUs * us, 5 * us);
    t += runNs;
    p.endRun(t, runNs);
    return team;
  };
  // Idle: waits explained by the chunks' size never start a trial, however long it runs.
  for (int i = 0; i < 500; ++i)
    REQUIRE(run(4 * ms, 0) == 3);
  // Stalls under 10% of the time dispatched do not either ...
  for (int i = 0; i < 100; ++i)
    REQUIRE(run(4 * ms, 50) == 3);
  // ... stalls of 300 us per 1 ms dispatch do: five runs with the small team.
  int runs = 0;
  while (!p.trying() && runs < 20) {
    run(4 * ms, 300);
    ++runs;
  }
  REQUIRE(p.trying());
  for (int i = 0; i < 5; ++i)
    CHECK(run(3 * ms) == 1); // faster than the whole team's 4 ms
  CHECK_FALSE(p.trying());
  CHECK(p.team() == 1);
  CHECK(p.holdNs() == 100 * ms); // the choice changed: the minimum hold
  // The small team stands for the hold; then the whole team is tried again (five runs).
  int64_t held = t;
  while (t < held + 100 * ms)
    REQUIRE(run(3 * ms) == 1);
  for (int i = 0; i < 5; ++i)
    CHECK(run(5 * ms, 300) == 3); // still slower: the small team is kept, for twice as long
  CHECK(p.team() == 1);
  CHECK(p.holdNs() == 200 * ms);
  held = t;
  while (t < held + 200 * ms)
    REQUIRE(run(3 * ms) == 1);
  // Now the whole team is faster (the load went away): it is chosen, with the minimum hold.
  for (int i = 0; i < 5; ++i)
    CHECK(run(2 * ms) == 3);
  CHECK(p.team() == 3);
  CHECK(p.holdNs() == 100 * ms);
  // Stalls, but the whole team stays faster than the small one (less than 5% slower counts as
  // not faster): kept, and no new trial during its hold however much it stalls.
  while (!p.trying())
    run(2 * ms, 300);
  for (int i = 0; i < 5; ++i)
    CHECK(run(int64_t(1.95 * ms)) == 1);
  CHECK(p.team() == 3);
  CHECK(p.holdNs() == 200 * ms);
  held = t;
  while (t < held + 190 * ms) {
    REQUIRE(run(2 * ms, 300) == 3);
    REQUIRE_FALSE(p.trying());
  }
  // The hold never grows past its maximum (2 s).
  for (int i = 0; i < 10; ++i) {
    while (!p.trying())
      run(2 * ms, 300);
    for (int k = 0; k < 5; ++k)
      run(3 * ms);
  }
  CHECK(p.holdNs() == 2'000 * ms);
}

// Runs so short that a trial costs at most 1% of the hold are tried on the small team without
// any stall (in effect under 0.2 ms), for enough runs to last 1 ms; longer runs never are.
TEST_CASE("thread pool: the team policy tries short runs on the small team without stalls") {
  using aicf::rt::TeamPolicy;
  constexpr int64_t ms = 1'000'000, us = 1'000;
  TeamPolicy p(1); // two threads: the small team is the caller alone
  int64_t t = 0;
  auto run = [&](int64_t runNs) {
    int team = p.beginRun(t);
    p.observe(runNs, 10 * us, 10 * us); // no stall
    t += runNs;
    p.endRun(t, runNs);
    return team;
  };
  // 0.5 ms runs: five of them would cost 2.5 ms, over 1% of the 100 ms hold: never tried.
  for (int i = 0; i < 2000; ++i)
    REQUIRE(run(500 * us) == 1);
  // 50 us runs: once 20 have run (1 ms), 20 runs on the caller alone.
  p = TeamPolicy(1);
  t = 0;
  int before = 0;
  while (!p.trying() && before < 100) {
    run(50 * us);
    ++before;
  }
  CHECK(before == 20);
  for (int i = 0; i < 20; ++i)
    CHECK(run(40 * us) == 0); // faster alone (the workers cost more to wake than they gain)
  CHECK(p.team() == 0);
  CHECK(p.holdNs() == 100 * ms);
  // After the hold the whole team is tried again, and kept when it is faster.
  int64_t held = t;
  while (t < held + 100 * ms)
    REQUIRE(run(40 * us) == 0);
  int trial = 0;
  while (p.trying() || trial == 0) {
    CHECK(run(30 * us) == 1);
    ++trial;
  }
  CHECK(trial == 25); // 1 ms of the caller's 40 us runs
  CHECK(p.team() == 1);
}

// The pool itself: a worker that holds its chunk for milliseconds (as one the OS descheduled
// would) makes the whole team slower than the caller alone; the pool finds that out and runs
// on the caller alone, and a fixed pool (adaptive = false) keeps every worker.
TEST_CASE("thread pool: workers that stall runs are left out once the caller alone is faster") {
  struct Slow {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> onWorkers{0};
    static void chunk(void *self, int64_t) {
      auto &s = *static_cast<Slow *>(self);
      if (std::this_thread::get_id() != s.caller) {
        s.onWorkers.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      } else { // ~20 us of work: the worker has time to wake and claim a chunk
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    }
  };
  ThreadPool pool(2);
  CHECK(pool.adaptive());
  CHECK(pool.activeWorkers() == 1);
  Slow s;
  // A run of four dispatches; stalls start a trial, after which the caller alone is chosen.
  auto run = [&](ThreadPool &p, Slow &sl) {
    p.beginRun();
    for (int d = 0; d < 4; ++d)
      p.run(64, &Slow::chunk, &sl);
    p.endRun();
  };
  for (int r = 0; r < 40 && pool.activeWorkers() == 1; ++r)
    run(pool, s);
  REQUIRE(s.onWorkers.load() > 0);
  CHECK(pool.activeWorkers() == 0);
  // While so, the caller runs every chunk.
  pool.beginRun();
  Counts c(300);
  pool.run(300, &Counts::chunk, &c);
  pool.endRun();
  checkOnce(c);
  CHECK(c.onOtherThreads.load() == 0);

  ThreadPool fixed(2, false, false);
  CHECK_FALSE(fixed.adaptive());
  Slow f;
  for (int r = 0; r < 10; ++r)
    run(fixed, f);
  CHECK(fixed.activeWorkers() == 1);
}
