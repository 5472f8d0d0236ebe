// Test helpers for running one kernel group on plain tensors: the buffer a group's kernel
// writes for an output is the output's own, or, for an output stored through a layout op
// (KernelGroup::storeThrough, lower/fusion.h), the layout op's result, of which the kernel
// writes its region only.
#pragma once

#include "ir/types.h"
#include "lower/fusion.h"

#include <cstring>
#include <map>

namespace aicf::testing {

// The type of the buffer the kernel of `g` writes output `v` into.
inline TensorType outputBufferType(const KernelGroup &g, const Value *v) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  return st ? st->into->type() : v->type();
}

// Calls f(offset in v, offset in the buffer written) for every element of output v.
template <class F>
void forEachStored(const KernelGroup::StoreThrough &st, F f) {
  const std::vector<int64_t> &shape = st.value->type().shape;
  std::vector<int64_t> strides = stridesOf(st.into->type().shape);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t n = st.value->type().numel();
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> to = st.map.apply(idx);
    int64_t off = 0;
    for (size_t d = 0; d < to.size(); ++d)
      off += to[d] * strides[d];
    f(j, off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

// Output v's values, read back from the buffer the kernel wrote.
inline Tensor outputValue(const KernelGroup &g, const Value *v, const Tensor &written) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st)
    return written;
  Tensor out(v->type());
  size_t es = dtypeSize(v->type().dtype);
  forEachStored(*st, [&](int64_t j, int64_t off) {
    std::memcpy(out.raw() + j * es, written.raw() + off * es, es);
  });
  return out;
}

// Keeps what the kernel wrote for output v in `buf` (storage values): v itself, or v's region of
// the layout op's result, which the other writers complete.
inline void keepOutput(const KernelGroup &g, const Value *v, Tensor written,
                       std::map<const Value *, Tensor> &buf) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st) {
    buf[v] = std::move(written);
    return;
  }
  auto it = buf.find(st->into);
  if (it == buf.end())
    it = buf.emplace(st->into, Tensor(st->into->type())).first;
  size_t es = dtypeSize(v->type().dtype);
  forEachStored(*st, [&](int64_t, int64_t off) {
    std::memcpy(it->second.raw() + off * es, written.raw() + off * es, es);
  });
}

} // namespace aicf::testing
