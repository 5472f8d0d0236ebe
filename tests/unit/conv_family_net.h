// A small CNN two tests share (test_block_channels.cpp at batch 1, test_symbolic_recipes.cpp
// over a symbolic batch, whose templates spell the batch as $(n)): a stride-2 stem with relu, a
// max pool, a 1x1 conv with clip, a depthwise stride-2 conv with hard-swish, a squeeze-and-
// excitation gate (global pool, two 1x1 convs, hard-sigmoid), a residual, an average pool
// (count_include_pad), a 3x3 and a 1x1 conv concatenated along channels. %x is
// f32[B,3,20,20]; %cat is f32[B,64,5,5] and %res f32[B,40,5,5]. The lines go between a graph
// header declaring %x and the outputs read from %cat / %res.
#pragma once

namespace aicf::test_nets {

inline const char *const kConvFamilyBody = R"(  %w0 = weight f32[24,3,3,3]
  %b0 = weight f32[24]
  %w1 = weight f32[40,24,1,1]
  %b1 = weight f32[40]
  %wd = weight f32[40,1,3,3]
  %bd = weight f32[40]
  %ws1 = weight f32[8,40,1,1]
  %bs1 = weight f32[8]
  %ws2 = weight f32[40,8,1,1]
  %bs2 = weight f32[40]
  %w2 = weight f32[40,40,1,1]
  %w3 = weight f32[32,40,3,3]
  %b3 = weight f32[32]
  %w4 = weight f32[32,40,1,1]
  %c0 = conv(%x, %w0, %b0) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  %mp = max_pool(%c0) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %c1 = conv(%mp, %w1, %b1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %r1 = clip(%c1) {min = 0.0, max = 6.0}
  %d = conv(%r1, %wd, %bd) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], group = 40, epilogue = ["hard_swish"]}
  %p = global_avg_pool(%d)
  %s1 = conv(%p, %ws1, %bs1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %s2 = conv(%s1, %ws2, %bs2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %g = hard_sigmoid(%s2)
  %se = mul(%d, %g)
  %c2 = conv(%se, %w2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %res = add(%c2, %d)
  %ap = avg_pool(%res) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], count_include_pad = 1}
  %c3 = conv(%ap, %w3, %b3) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %c4 = conv(%res, %w4) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %cat = concat(%c3, %c4) {axis = 1}
)";

} // namespace aicf::test_nets
