// The runtime's thread pool (runtime/thread_pool.h): every chunk runs exactly once per run, on
// the caller and the workers; a run completes on the calling thread alone when the workers take
// no part (as if the OS had descheduled them: the property that keeps a contended machine from
// stalling every step); and consecutive runs of different sizes do not mix their chunks.
#include "runtime/thread_pool.h"

#include <doctest/doctest.h>

#include <atomic>
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
