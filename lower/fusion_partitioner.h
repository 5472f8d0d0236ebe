// The partitioner behind partitionGraph (lower/fusion.h), internal to lower/: the group state
// and each fusion rule's steps. The rules are listed (with why) and run in order in fusion.cpp,
// which also holds the group bookkeeping they share; each rule's steps are in a file of its own
// (fusion_rule_*.cpp, named below).
#pragma once

#include "lower/fusion.h"
#include "lower/group_expr.h"

#include "ir/index_map.h"

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace aicf::fusion {

// What a group's recipe can absorb, by anchor op (nullptr: a pure elementwise group).
struct Caps {
  bool prologue = true;    // inlines fused producers of its operands (GroupExpr::at)
  bool epilogue = true;    // applies elementwise consumers of its result before storing
  bool multiOutput = true; // writes every group output (not only the last epilogue value)
  // A prologue changes how the anchor reads that operand (a pointwise blocked conv reads its
  // input in place; with a prologue it fills a band per tile): folded only where priced (rule
  // 4 with a kernel cost function), never copied by rule 5.
  bool pricedPrologue = false;
};

// Whether two values have the same dims at every point of the symbolic dims' ranges: their
// planning shapes may agree by chance ([n, 128] and [128, 128] planned at n = 128).
bool sameDims(const TensorType &a, const TensorType &b);
// Whether reading through reshape n divides by a symbolic size per element (issue 21).
bool symbolicRegroup(const Node &n);
// What the recipe of a group with this anchor can absorb (nullptr: a pure elementwise group).
Caps capsFor(const Node *anchor);

class Partitioner {
public:
  Partitioner(const Graph &g, const FusionOptions &opts);
  // Runs the rules in order (kRules) and orders the groups (finish).
  Partition run();

private:
  // A fusion rule as run(): its number and name, why it exists, whether the options enable it
  // (null: always), and its step.
  struct Rule {
    const char *rule;
    const char *why;
    bool (*enabled)(const FusionOptions &);
    void (Partitioner::*apply)(Partition &);
  };
  static const Rule kRules[];

  // Rules 1 and 2 (fusion.cpp): views alias, other non-elementwise nodes anchor groups.
  void viewsAndAnchors(Partition &p);

  struct Group {
    Node *anchor = nullptr;
    std::vector<Node *> nodes; // unsorted until finish()
    bool alive = true;
    int minIdx = 0, maxIdx = 0; // positions of its first and last node (rule 3's pruning)
    // The members' results by shape (rule 3 for pure elementwise groups: only results of
    // another shape than the joining node's can break the one-output-shape rule).
    // Keyed by the dims as expressions, which tell symbolic shapes apart.
    std::map<std::vector<SymExpr>, std::vector<const Value *>> resultsByShape;
  };

  bool floating(const Node *n) const { return n && floating_[idx(n)]; }
  const std::vector<Node *> &usersOf(const Value *v) const {
    static const std::vector<Node *> none;
    auto it = users_.find(v);
    return it == users_.end() ? none : it->second;
  }
  int idx(const Node *n) const { return index_.at(n); }
  bool inGroup(const Node *n, int gi) const { return n && groupOf_[idx(n)] == gi; }
  // A node setting a data dim: its every result is stored, read elsewhere or not (rule 11): the
  // runtime reads the count (the last one) after the step to size what follows, and
  // non_max_suppression reads its rows back.
  static bool setsDataDim(const Node *m) { return m->info().has(SETS_DIM); }

  // Group bookkeeping, the merges of rules 7-10 and the final order (fusion.cpp).
  void sourceGroups(const Value *v, std::vector<int> &out) const;
  void readers(const Value *v, std::vector<const Node *> &out) const;
  void newGroup(Node *anchor, Node *first);
  void add(int gi, Node *n, bool epilogue);
  bool full(int gi, size_t more) const;
  bool contains(int gi, const Node *n) const;
  bool readAsInput(int gi, const Node *anchor) const; // rule 4 (fusion_rule_prologue.cpp)
  bool holdsBranchCondition(int gi) const;
  int directGroup(const Value *v) const;
  void storageGroups(const Value *v, std::vector<int> &out) const;
  bool dependsOn(int from, int target) const;
  std::vector<int> externalSources(const std::vector<int> &gs) const;
  bool staysAcyclic(const std::vector<int> &srcs, const std::vector<int> &targets) const;
  bool neededOutside(const Value *v, int gi, const Node *joining = nullptr) const;
  void finish(Partition &p);
  KernelGroup kernelGroup(int gi) const;
  bool mergeStaysAcyclic(int into, const std::vector<int> &from) const;
  KernelPrice priceGroup(int g);
  bool tryMerge(int into, const std::vector<int> &from, bool fuse, RematDecision &dec,
                const std::function<void()> &mark, const std::function<void()> &unmark);

  // Rule 0 (layout ops): fusion_rule_layout.cpp.
  // Rule 0, producer side: where each operand of layout op n would be stored from — the value
  // its producer computes (the operand itself, or the source of a chain of reshapes and of
  // transposes and unit-step slices read by nothing else), with the map from that value's
  // index to n's result index and the bounds of the elements that land (a slice's window).
  // Empty when n cannot be stored: it is no transpose, concat or slice, its result is sized by
  // a data dim, or an operand is an input or weight, a graph output, read by anything else, or
  // computed by a node setting a data dim (rule 11) (the reader-side decision then stands).
  struct Sink {
    const Value *value = nullptr;
    IndexMap map;
    std::vector<IndexBound> keep;
    std::vector<const Node *> through; // the transposes and slices walked through
  };
  void collectReads(const Node *n, std::vector<LayoutRead> &reads, std::string &why) const;
  std::vector<Sink> sinkPlan(const Node *n) const;
  static std::string valueName(const Value *v);
  static bool contiguousStores(const std::vector<Sink> &sinks);
  void decideLayout(Partition &p);
  void attachFolded(int gi);

  // Rule 3 (epilogues): fusion_rule_epilogue.cpp.
  void joinEpilogues(Partition &p);
  bool canJoinAsEpilogue(Node *n, int gi) const;

  // Rule 4 (prologues): fusion_rule_prologue.cpp.
  void foldPrologues(Partition &);
  int soleConsumer(int gi) const;

  // Rule 5 (rematerialisation): fusion_rule_remat.cpp.
  std::vector<int> consumersOf(int gi) const;
  void rematerialize(Partition &p);

  // Rule 7 (row norms): fusion_rule_row_norm.cpp.
  void foldRowNorms(Partition &p);

  // Rule 8 (chained contractions): fusion_rule_chain.cpp.
  static bool chainable(const Node &n);
  static bool sameBatch(const Node &c1, const Node &c2);
  int soleProducerGroup(const Node &n, const Value *v, int own) const;
  bool aloneIn(int gi, const Node *c) const;
  void chainContractions(Partition &p);

  // Rule 9 (norm epilogues): fusion_rule_norm_epilogue.cpp.
  void foldNormEpilogues(Partition &p);

  // Rule 10 (conv chains): fusion_rule_conv_chain.cpp.
  static bool pointwiseBlocked(const Node &n);
  static bool ringDepthwise(const Node &n);
  bool convLink(int gi, const Value *v);
  void chainConvs(Partition &p);

  const Graph &g_;
  FusionOptions opts_;
  std::map<int, const Node *> normEpilogue_;         // rule 9: group -> its row norm epilogue
  std::map<int, std::vector<const Node *>> chained_; // rule 8: group -> the contractions
                                                     // chained into it
  std::set<const Node *> recomputed_; // nodes copied into several consumer groups (rules 5, 7)
  std::vector<Node *> nodes_;
  std::unordered_map<const Node *, int> index_;
  std::unordered_map<const Value *, std::vector<Node *>> users_;
  std::unordered_set<const Value *> outputs_; // the graph's outputs
  std::vector<int> groupOf_;
  std::vector<char> isEpilogue_;   // by node position: joined an anchor group as epilogue
  std::vector<char> floating_;     // by node position: a folded layout op (rule 0)
  std::vector<char> stored_;       // by node position: stored by its producers (rule 0)
  std::set<std::string> dataDims_; // the data dims the graph's nodes set (rule 11)
  // Rule 0's producer side: a value stored into a layout op's result, and through which map.
  std::unordered_map<const Value *, KernelGroup::StoreThrough> sinkOf_;
  std::set<std::pair<int, int>> copies_; // (group, node position): rule 5's recomputed copies
  std::vector<Group> groups_;
  mutable std::vector<uint64_t> seen_; // dependsOn's visited marks (== stamp_)
  mutable uint64_t stamp_ = 0;
};

} // namespace aicf::fusion
