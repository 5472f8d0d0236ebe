// Kernel IR (docs/architecture.md): every kernel is a loop nest over explicit grid axes and block
// threads, with memory scopes, loads/stores with index expressions, reductions, barriers and
// block-level collectives — no kernel names, no library calls. Lowering recipes build it; the
// planner sets its knobs; printers spell it as C++ (host) or CUDA without adding logic.
//
// The SIMT rule (checked by kir::verify):
//   * A kernel body is block-level code: allocations, thread regions, barriers, collectives
//     (block_reduce, mma_tile) and block-level serial loops whose bounds are uniform (they may
//     use grid axes and constants, never the thread id).
//   * Thread-level code lives only inside a `region` (one per block-level step); a region holds
//     no barrier, no collective and no nested region.
//   * Per-thread state that lives across regions is a `local` buffer whose first dimension is
//     the thread count, indexed by the thread id; scalar variables die with their region.
// With this rule the host printer runs each region as a loop over thread ids in order (so
// barriers need no code) and the CUDA printer maps the thread id to threadIdx.x.
#pragma once

#include "ir/precision.h"
#include "ir/types.h"
#include "support/sym_expr.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aicf::kir {

enum class Scope : uint8_t { Global, Shared, Local };
enum class Role : uint8_t { In, Out, Temp }; // global params are In or Out; others Temp

struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // row-major; local buffers: [threads, ...]
  Scope scope = Scope::Global;
  Role role = Role::Temp;
  // A global param whose dims depend on symbolic dims (issue 21): every dim as an expression
  // (`shape` then holds the planning-point values); its row strides are read from these. Empty
  // otherwise. (Last, so that the recipes' positional initialisers stay as they are.)
  std::vector<SymExpr> sym;
  int64_t numel() const;
};
using BufferP = std::shared_ptr<Buffer>;

enum class UnOp : uint8_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Erf,
  Sigmoid,
  Floor,
  Ceil,
  Round,
  Sin,
  Cos,
  Not,
  Sign
};
enum class BinOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Min,
  Max,
  Pow, // Div on ints truncates; Mod on ints: C++ % semantics
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or // results are bool
};
const char *unOpName(UnOp op);
const char *binOpName(BinOp op);

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

// A scalar expression. Index arithmetic is i64; values take the buffer dtypes, with float
// arithmetic on f16/bf16 values done in f32 (loads widen, stores narrow).
struct Expr {
  enum class Kind : uint8_t { Int, Float, Var, Load, Unary, Binary, Select, Cast };
  Kind kind = Kind::Int;
  DType type = DType::I64; // the value's type (f16/bf16 loads have type f32: widened)
  int64_t ival = 0;        // Int
  double fval = 0;         // Float
  std::string var;         // Var: loop variable, thread id, grid axis or scalar
  BufferP buf;             // Load
  std::vector<ExprP> args; // Load: indices; Unary: 1; Binary: 2; Select: cond, a, b; Cast: 1
  UnOp uop = UnOp::Neg;
  BinOp bop = BinOp::Add;
};

// Builders (E wraps an ExprP so recipes can write i * 4 + j).
class E {
public:
  E() = default;
  E(ExprP p) : p_(std::move(p)) {}         // NOLINT: implicit by design
  E(int64_t v);                            // NOLINT: i64 constant
  E(int v) : E(static_cast<int64_t>(v)) {} // NOLINT
  const ExprP &get() const { return p_; }
  const Expr *operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

private:
  ExprP p_;
};
E fconst(double v, DType t = DType::F32);
E var(const std::string &name, DType t = DType::I64);
E load(const BufferP &b, std::vector<E> idx);
E unary(UnOp op, E a);
E binary(BinOp op, E a, E b);
E select(E cond, E a, E b);
E cast(E a, DType to);
E operator+(E a, E b);
E operator-(E a, E b);
E operator*(E a, E b);
E operator/(E a, E b);
E operator%(E a, E b);
E min(E a, E b);
E max(E a, E b);
E operator<(E a, E b);
E operator<=(E a, E b);
E operator>(E a, E b);
E operator>=(E a, E b);
E operator==(E a, E b);
E operator&&(E a, E b);

// An associative merge of a state tuple, for block_reduce: given the fields of two states as
// variables "a_<field>" and "b_<field>", `merged[i]` computes field i of the merged state
// (optionally via `lets`, evaluated in order). Softmax (max, sum), Welford (n, mean, m2),
// plain sums are all Combiners; the generic norm recipe builds them from a state algebra.
struct Combiner {
  std::string name;
  std::vector<std::pair<std::string, DType>> fields;
  std::vector<std::pair<std::string, E>> lets;
  std::vector<E> merged;
};

struct Stmt;
using StmtP = std::shared_ptr<Stmt>;

// The warp-level tensor-core instruction an mma_tile runs on (sm_80+, PTX mma.sync), or None:
// SIMT, f32 FMAs. M16N8K16: A and B both f16 or both bf16 (staged so), M16N8K8: tf32, A and B
// f32 buffers whose elements are rounded to tf32 (ir/precision.h roundToPrecision) as they are
// read. Either way each product is exact in f32 and accumulates into the f32 C.
enum class MmaFrag : uint8_t { None, M16N8K16, M16N8K8 };
const char *mmaFragName(MmaFrag f); // "simt", "m16n8k16", "m16n8k8"
std::optional<MmaFrag> mmaFragByName(std::string_view s);
int64_t mmaFragK(MmaFrag f); // the instruction's k: 16, 8 (None: 1)
// Where thread t's accumulator element (i, j) of an m x n mma_tile with tm x tn per thread sits
// in the tile (see Stmt::MmaTile): row and column expressions.
E mmaTileRow(MmaFrag f, int64_t n, int64_t tm, int64_t tn, const E &t, const E &i);
E mmaTileCol(MmaFrag f, int64_t n, int64_t tm, int64_t tn, const E &t, const E &j);

struct Stmt {
  enum class Kind : uint8_t {
    Seq,         // body
    For,         // var in [begin, begin + extent) step `step`; loop kind
    Region,      // thread region: body runs once per thread id `var` in [0, threads)
    If,          // cond ? body : elseBody
    Store,       // buf[indices] = value
    Decl,        // scalar `var` of dtype = value (mutable; scoped to the enclosing body)
    Assign,      // scalar var = value
    Barrier,     // block-wide barrier (block level only)
    BlockReduce, // block level: reduce per-thread state (src bufs, one per combiner field,
                 // shape [threads]) into dst bufs (shared, shape [1]) visible to all threads
    MmaTile,     // block level: C[t] += A x B on on-chip tiles (see the fields below)
    Reduce,      // `init` once, then for var in [begin, begin + extent) step: `update`.
                 // Kept apart so Kernel-IR passes (FuseReductionEpilogue) see the
                 // accumulator's initialisation and update separately (TVM-TIR style).
                 // Allowed at block level (uniform bounds) or inside a region.
    Comment,     // text, printed as a comment (explains a recipe's structure)
  };
  // Vectorized: the iterations are independent, except that a scalar declared outside the loop
  // may accumulate, `x = x + e`, `x = max(x, e)` or `x = min(x, e)` (loopReductions): a
  // reduction whose order the backend may change (the recipe only marks such a loop where the
  // reassociation is certified, e.g. the online softmax of weighted_streaming_reduction).
  enum class LoopKind : uint8_t { Serial, Unrolled, Vectorized };

  Kind kind = Kind::Seq;
  std::vector<StmtP> body, elseBody;
  std::vector<StmtP> init, update; // Reduce
  std::string var;                 // For / Region / Decl / Assign
  DType dtype = DType::I64;        // Decl
  E begin, extent, value, cond;
  int64_t step = 1;
  LoopKind loop = LoopKind::Serial;
  BufferP buf;
  std::vector<E> indices;
  std::string text; // Comment
  // BlockReduce
  Combiner combiner;
  std::vector<BufferP> src, dst;
  // MmaTile: A [m, k] and B [k, n] shared, C local [threads, tm, tn]; thread t owns the tile
  // rows (t / (n / tn)) * tm + [0, tm) and columns (t % (n / tn)) * tn + [0, tn);
  // C[t][i][j] += sum over kk < k of A[row i][kk] * B[kk][col j].
  // Tensor-core fragments (`frag` set, staged operands only): warp w = t / 32, lane l = t % 32
  // owns a warp tile of 8 tm rows and 4 tn columns, at (w / (n / 4 tn)) 8 tm, (w % (n / 4 tn))
  // 4 tn, tiled by m16n8 accumulators; its element (i, j) lies at warp row (i / 2) 16 + (i % 2)
  // 8 + l / 4 and warp column (j / 2) 8 + (l % 4) 2 + j % 2 (the PTX ISA's m16n8 C layout). tm
  // and tn are even, k a multiple of the instruction's k, threads = (m / 8 tm)(n / 4 tn) 32.
  // C[t][i][j] accumulates A[row][kk] B[kk][col] for kk = 0, 1, .. k - 1 in that order, in f32
  // (each product exact): the order the host emulation keeps (the hardware sums each k16 step
  // inside the instruction, so a GPU's last bits may differ).
  // Operand views (one-thread host tiles, `views` set): A and B are then read where they lie,
  // in any buffer (a kernel parameter), instead of from staged tiles:
  //   A[i][kk] = a[indices[0] + i * lda + kk], or, with aBlocks = {s0, s1, s2, n1, n2, L} (a
  //              conv input: k in blocks of L contiguous floats, the 16 lanes of a channel
  //              block or a kernel row's KW taps of a plain input; block b = indices[5] + kk /
  //              L as (b0, b1, b2) over (*, n1, n2)), a[indices[0] + i * lda + b0 s0 + b1 s1 +
  //              b2 s2 + kk % L]; with aGroups = {G, gs} as well (a blocked conv's
  //              tile of several output rows, each G pixels wide), row i starts at (i / G) gs +
  //              (i % G) lda instead of i lda; with aTaps = {d, H, s, c0, cs, cd, W} as well
  //              (a conv's band: k's block b1 digit a kernel row kh, b2 a kernel column kw
  //              when W != 0), indices[6] and [7] = lo, hi: the input rows kernel row 0 reads
  //              for the tile's first and last rows. A[i][kk] is zero (the padding) where
  //              kk's kernel row reads outside [0, H) for every row of the tile (lo + kh d >
  //              H - 1, or hi + kh d < 0), or, with groups, for row i's own output row (lo +
  //              (i / G) s + kh d outside [0, H), when s != 0), or its kernel column reads
  //              outside [0, W) at row i's pixel (c0 + (i % G) cs + kw cd, when W != 0): the
  //              tile may skip those products, w * 0 (stated only for finite weights);
  //   B[kk][j] = b[indices[1] + kk * ldb + j] when bPanel == 0, or, B stored in panels of
  //              bPanel columns (a weight packed at compile time), b[indices[1] +
  //              (j' / bPanel) * bPanelStride + kk * bPanel + j' % bPanel] with j' = j + c0, c0
  //              the tile's first column inside its first panel (bFirstCol: the last index, a
  //              multiple of 16; 0 without it);
  // and only rows i < indices[2], columns j < indices[3] and kk < indices[4] take part (the
  // tile's valid rows, columns and K step: a view has no zero padding to read; columns stay a
  // multiple of 16, the panel's padding being zeros; a tile of panels starts on a panel).
  // Fused init and epilogue (views only, tn a multiple of 16; FuseMmaTileEpilogue,
  // kir/fuse_mma_tile_epilogue.h): when `fused`, the tile's per-element init and epilogue ride
  // on the accumulation. `init` (the statement's init list) is run for each element (i, j = jo
  // * 16 + jl) of the valid rows and columns before the accumulation when `first` holds, and
  // must store C[t, i, j]; `body` (the epilogue) is run for each such element after it when
  // `last` holds, and reads C[t, i, j] (only there: C is accessed at [t, i, j] only, each body
  // starting with `var j: i64 = jo * 16 + jl`). The variables t (the thread var), i, jo and jl
  // are bound there. Elements outside the valid rows and columns get neither, so an epilogue's
  // stores carry the guards that keep them off those elements (FuseMmaTileEpilogue checks it).
  // `first` and `last` are the enclosing reduction's first and last K steps. Exactly: if
  // (first) init; C += A x B; if (last) epilogue, elementwise. The host printer runs both on
  // the micro-kernel's registers; no pass over C remains.
  bool fused = false;
  E first, last;
  MmaFrag frag = MmaFrag::None;
  BufferP a, b, c;
  int64_t m = 0, n = 0, k = 0, tm = 0, tn = 0;
  bool views = false;
  int64_t lda = 0, ldb = 0, bPanel = 0, bPanelStride = 0;
  std::vector<int64_t> aBlocks; // empty, or {s0, s1, s2, n1, n2, L}
  std::vector<int64_t> aGroups; // empty, or {G, gs} (with aBlocks only)
  std::vector<int64_t> aTaps;   // empty, or {d, H, s, c0, cs, cd, W} (with aBlocks): zero blocks
  bool bFirstCol = false;       // panels: indices ends with c0
  // panels: while its rows pass over one panel's K step, the tile streams the next panel's (or
  // the next K step's first) into L2, for a weight wider than L2 (the host printer spreads the
  // prefetches over the passes); a hint, no effect on the result.
  bool bPrefetch = false;
  // panels of bf16 pairs or int8 quads: the products on AMX tiles where the folder's -march has
  // amx-bf16 / amx-int8 (vdpbf16ps / vpdpbusd otherwise); chosen by the cost model
  // (tiled_contraction's `tiles` knob).
  bool bTiles = false;
  // B an int8 weight in k quads (panels; precision int8, passes/pack_weights.cpp): A holds
  // integers whose values plus aShift lie in [0, 255] (a quantized activation less its zero
  // point), which the int8 micro-kernel reads as uint8 and corrects by aShift times B's column
  // sums; exact in i32.
  int64_t aShift = 0;
  // The indices a view carries: offsets, extents, then A's first block, the taps' lo and hi and
  // B's c0 if set.
  size_t viewIndices() const {
    return 5 + (aBlocks.empty() ? 0 : 1) + (aTaps.empty() ? 0 : 2) + (bFirstCol ? 1 : 0);
  }
};

// The scalars declared outside For loop `loop` that its body accumulates (`x = x + e`,
// `x = max(x, e)`, `x = min(x, e)`, with e not reading x), each with its operator (Add, Max or
// Min), in first-assignment order; nullopt when an outer scalar is assigned any other way.
struct LoopReduction {
  std::string var;
  BinOp op = BinOp::Add;
};
std::optional<std::vector<LoopReduction>> loopReductions(const Stmt &loop);

// Walkers the Kernel IR passes and printers share.
// Whether `e` reads variable `v`.
bool readsVar(const ExprP &e, const std::string &v);
// fn on `e` and every subexpression, pre-order.
void forEachExpr(const ExprP &e, const std::function<void(const Expr &)> &fn);
// The expressions a statement holds directly (not its children's): bounds, value, condition,
// indices, an mma_tile's first / last, a combiner's lets and merged fields.
std::vector<const E *> ownExprs(const Stmt &s);
// fn on every statement of `list` and below (body, else, init and update lists), pre-order.
void forEachStmt(const std::vector<StmtP> &list, const std::function<void(const Stmt &)> &fn);
// The For statements of `stmts`, outermost first, through seq, region, if / else and a reduce's
// init and update (not into an mma_tile's fused init and epilogue: the micro-kernel's contract):
// `fn(loop)` gives the loop's replacement, or null to keep it and visit its body instead. For a
// Kernel IR pass that versions loops. Whether fn replaced any loop.
bool rewriteLoops(std::vector<StmtP> &stmts, const std::function<StmtP(const StmtP &)> &fn);
// A copy of s and every statement below it (expressions shared: they are immutable), for a pass
// that versions code: each version owns its statements, which later passes rewrite in place.
StmtP deepCopy(const StmtP &s);

struct Kernel;
// The arithmetic of the kernel's products: the precision its tensor-core mma_tiles read their
// operands in (tf32, fp16, bf16), bf16 for the host's micro-kernel on bf16 pair panels, or fp32
// (SIMT products, or none).
Precision kernelPrecision(const Kernel &k);

// Statement builders.
StmtP seq(std::vector<StmtP> body);
StmtP forLoop(const std::string &var, E begin, E extent, std::vector<StmtP> body, int64_t step = 1,
              Stmt::LoopKind kind = Stmt::LoopKind::Serial);
StmtP region(const std::string &threadVar, std::vector<StmtP> body);
StmtP ifThen(E cond, std::vector<StmtP> then, std::vector<StmtP> otherwise = {});
StmtP store(const BufferP &b, std::vector<E> idx, E value);
StmtP decl(const std::string &name, DType t, E init);
StmtP assign(const std::string &name, E value);
StmtP barrier();
StmtP blockReduce(Combiner c, std::vector<BufferP> src, std::vector<BufferP> dst);
StmtP mmaTile(BufferP c, BufferP a, BufferP b, int64_t m, int64_t n, int64_t k, int64_t tm,
              int64_t tn);
// An mma_tile reading its operands through views (see Stmt): A at aOffset with row stride lda,
// B at bOffset with row stride ldb (bPanel == 0) or in panels of bPanel columns, bPanelStride
// apart; A's k in blocks of L at the offsets aBlocks gives (see Stmt), the first firstBlock,
// when aBlocks is set, and A's rows in groups of G, gs apart, when aGroups = {G, gs} is; rows,
// cols and depth are the valid rows, columns and K step; aTaps = {d, H, s, c0, cs, cd, W} with
// tapLo, tapHi: the blocks of padding the tile may skip (see Stmt).
struct MmaViews {
  E aOffset, bOffset, rows, cols, depth, firstBlock, tapLo, tapHi;
  E bFirstCol; // panels: the tile's first column inside the first panel (unset: 0)
  int64_t lda = 0, ldb = 0, bPanel = 0, bPanelStride = 0;
  bool bPrefetch = false; // panels only (see Stmt)
  bool bTiles = false;    // bf16 pair or int8 quad panels only (see Stmt)
  int64_t aShift = 0;     // int8 quad panels only (see Stmt)
  std::vector<int64_t> aBlocks, aGroups, aTaps;
};
StmtP mmaTileViews(BufferP c, BufferP a, BufferP b, int64_t m, int64_t n, int64_t k, int64_t tm,
                   int64_t tn, const MmaViews &v);
StmtP comment(std::string text);
StmtP reduce(const std::string &var, E begin, E extent, std::vector<StmtP> init,
             std::vector<StmtP> update, int64_t step = 1);

// Base of a recipe's problem description (Kernel::problem).
struct ProblemFacts {
  virtual ~ProblemFacts() = default;
};

// A kernel: grid axes (outermost first), the block's thread count, parameters (global buffers,
// in the order the launcher passes them), on-chip allocations, and the block-level body.
struct Kernel {
  std::string name;   // symbol, e.g. "k3_attention"
  std::string recipe; // "streaming_attention", "tiled_contraction", ...
  std::vector<std::pair<std::string, int64_t>> grid; // (axis var, extent)
  std::string threadVar = "t";
  int64_t threads = 1;
  std::vector<BufferP> params;
  std::vector<BufferP> allocs; // shared and local buffers
  std::vector<StmtP> body;
  // Symbolic dims (issue 21): the graph's dims, in the order the runtime passes their values,
  // when the kernel reads any (as the i64 variables dimVar(name): uniform, like grid axes); empty
  // for a static kernel.
  std::vector<std::string> dims;
  // One extent per grid axis when any axis depends on the dims (`grid` then holds the
  // planning-point extents, which only the cost model reads); empty otherwise.
  std::vector<SymExtent> symGrid;
  std::map<std::string, int64_t> knobs; // the schedule knobs the recipe was built with
  // The recipe's typed description of the problem the schedule tiles (contraction M, N, K;
  // attention Sq, Sk, D; norm rows and row length; ...: lower/recipes.h), read back by the same
  // recipe's candidate generator and cost shape. Opaque here; not printed; no effect on the
  // generated code.
  std::shared_ptr<const ProblemFacts> problem;
};

// The Kernel IR variable holding symbolic dim `name` ("sym_seq").
std::string dimVar(const std::string &name);
// A symbolic dim expression as Kernel IR (constants fold: a static expression is an Int).
E symE(const SymExpr &e);
// ceil(e.num / e.div) as Kernel IR.
E symE(const SymExtent &e);

// Text form for goldens and --emit kernels (deterministic); kir/kir_parser.h reads it back.
std::string printKernel(const Kernel &k);
// One expression in that text form ("max(acc[t, q] + C[q, t], 0.0)"), e.g. for diagnostics.
// `f32Values`: f32 constants as the f32 value computed with ("0.35", not the stored double
// "0.3499999940395355"), as diagnostics quote them; the kernel text keeps the double.
std::string exprStr(const E &e, bool f32Values = false);

// Structural equality of expressions: same kinds, types, constants (NaN equals NaN), variables,
// buffers and operands.
bool exprEqual(const ExprP &a, const ExprP &b);
// `e` with variables renamed by `rename` and loads of `from` redirected to `to` (either may be
// empty); unchanged subtrees are shared, not copied.
E rewriteExpr(const E &e, const std::map<std::string, std::string> &rename,
              const BufferP &from = {}, const BufferP &to = {});
// One expression as printKernel spells it ("p0[mt * 8 + ar, k0 + ac]").
std::string printExpr(const E &e);

// Checks structure and the SIMT rule; returns every violation as "kernel NAME: message".
std::vector<std::string> verifyKernel(const Kernel &k);
// verifyKernel's violations as one text, each on its own indented line ("\n  kernel NAME: ...");
// empty when the kernel is valid (for the error the compile driver and the printers throw).
std::string verifyKernelText(const Kernel &k);

} // namespace aicf::kir
