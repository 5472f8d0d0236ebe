// Dispatch groups (plan/dispatch_groups.h): which neighbouring host steps share one thread-pool
// dispatch. Built on hand-made plans so that each memory relation is exercised on its own: a
// read after a write, a write after a read, two writes to overlapping arena bytes, views,
// weights (read-only), the user's outputs, a runtime copy in between, and tiny steps.
#include "plan/dispatch_groups.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace aicf;

namespace {

struct PlanBuilder {
  Plan p;
  std::string buffer(BufferKind kind, int64_t offset, int64_t bytes, std::string aliasOf = "") {
    PlanBuffer b;
    b.id = "b" + std::to_string(p.buffers.size());
    b.kind = kind;
    b.offset = offset;
    b.bytes = bytes;
    b.aliasOf = std::move(aliasOf);
    p.buffers.push_back(b);
    return b.id;
  }
  void step(std::vector<std::string> in, std::vector<std::string> out, int64_t chunks = 4,
            double timeUs = 50, std::string kindId = "") {
    PlanStep s;
    s.kind = "k";
    s.kindId = kindId.empty() ? "k" + std::to_string(p.steps.size()) : kindId;
    s.inputs = std::move(in);
    s.outputs = std::move(out);
    s.chunks = chunks;
    s.timeUs = timeUs;
    p.steps.push_back(s);
  }
  std::vector<int> groups(int cores = 2) {
    Hardware hw;
    hw.cores = cores;
    groupDispatches(p, hw);
    std::vector<int> g;
    for (const PlanStep &s : p.steps)
      g.push_back(s.group);
    return g;
  }
};

} // namespace

TEST_CASE("dispatch groups: independent neighbours share a dispatch, dependent ones do not") {
  PlanBuilder b;
  std::string x = b.buffer(BufferKind::Input, 0, 64);
  std::string w = b.buffer(BufferKind::Weight, 0, 64);
  std::string q = b.buffer(BufferKind::Arena, 0, 64), k = b.buffer(BufferKind::Arena, 64, 64),
              v = b.buffer(BufferKind::Arena, 128, 64), o = b.buffer(BufferKind::Arena, 192, 64);
  std::string y = b.buffer(BufferKind::Output, 0, 64);
  b.step({x, w}, {q});    // 0: Q, K and V read the same input and weight, write disjoint bytes
  b.step({x, w}, {k});    // 1
  b.step({x, w}, {v});    // 2
  b.step({q, k, v}, {o}); // 3: reads what 0..2 wrote (read after write)
  b.step({o}, {y});       // 4: reads 3's output
  CHECK(b.groups() == std::vector<int>{0, 0, 0, -1, -1});
}

TEST_CASE("dispatch groups: a write over bytes a neighbour reads or writes ends the group") {
  SUBCASE("write after read: the second step reuses the arena bytes the first reads") {
    PlanBuilder b;
    std::string x = b.buffer(BufferKind::Input, 0, 64);
    std::string a = b.buffer(BufferKind::Arena, 0, 64), c = b.buffer(BufferKind::Arena, 64, 64);
    std::string reuse = b.buffer(BufferKind::Arena, 32, 64); // overlaps a's last 32 bytes
    b.step({x}, {a});
    b.step({a}, {c});
    b.step({x}, {reuse});
    CHECK(b.groups() == std::vector<int>{-1, -1, -1});
  }
  SUBCASE("two writes to overlapping bytes; adjacent ranges do not overlap") {
    PlanBuilder b;
    std::string x = b.buffer(BufferKind::Input, 0, 64);
    std::string a = b.buffer(BufferKind::Arena, 0, 64), c = b.buffer(BufferKind::Arena, 63, 64),
                d = b.buffer(BufferKind::Arena, 127, 64);
    b.step({x}, {a});
    b.step({x}, {c}); // overlaps a by one byte
    b.step({x}, {d}); // starts where c ends
    CHECK(b.groups() == std::vector<int>{-1, 1, 1});
  }
  SUBCASE("a view is its storage: writing one, reading the other, conflicts") {
    PlanBuilder b;
    std::string x = b.buffer(BufferKind::Input, 0, 64);
    std::string a = b.buffer(BufferKind::Arena, 0, 64);
    std::string view = b.buffer(BufferKind::Arena, 0, 64, a);
    std::string c = b.buffer(BufferKind::Arena, 64, 64);
    b.step({x}, {a});
    b.step({view}, {c});
    CHECK(b.groups() == std::vector<int>{-1, -1});
  }
  SUBCASE("the user's output buffers: one written and read conflicts, two distinct do not") {
    PlanBuilder b;
    std::string x = b.buffer(BufferKind::Input, 0, 64);
    std::string y0 = b.buffer(BufferKind::Output, 0, 64), y1 = b.buffer(BufferKind::Output, 0, 64);
    std::string a = b.buffer(BufferKind::Arena, 0, 64);
    b.step({x}, {y0});
    b.step({x}, {y1});
    b.step({y1}, {a});
    CHECK(b.groups() == std::vector<int>{0, 0, -1});
  }
}

TEST_CASE("dispatch groups: a runtime copy stands alone; tiny steps group once worth a dispatch") {
  SUBCASE("copy") {
    PlanBuilder b;
    std::string x = b.buffer(BufferKind::Input, 0, 64);
    std::string a = b.buffer(BufferKind::Arena, 0, 64), c = b.buffer(BufferKind::Arena, 64, 64),
                y = b.buffer(BufferKind::Output, 0, 64), d = b.buffer(BufferKind::Arena, 128, 64);
    b.step({x}, {a});
    b.step({x}, {c});
    b.step({a}, {y}, 0, 0, ""); // a copy: no kernel symbol, no chunks
    b.p.steps.back().kindId.clear();
    b.step({x}, {d});
    CHECK(b.groups() == std::vector<int>{0, 0, -1, -1});
  }
  SUBCASE("tiny") {
    // One chunk each (under kHostSerialUs of one core's work): 2 x 2 x 2 us = 8 us together
    // stays on the caller; three of 2 us at 2 cores (12 us) are worth a dispatch.
    PlanBuilder two, three;
    for (PlanBuilder *b : {&two, &three}) {
      std::string x = b->buffer(BufferKind::Input, 0, 64);
      int n = b == &two ? 2 : 3;
      for (int i = 0; i < n; ++i)
        b->step({x}, {b->buffer(BufferKind::Arena, 64 * i, 64)}, 1, 2.0);
    }
    CHECK(two.groups() == std::vector<int>{-1, -1});
    CHECK(three.groups() == std::vector<int>{0, 0, 0});
  }
}
