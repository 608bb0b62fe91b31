// The canonical shard layout (DESIGN §6): sizes, offsets, groups, padding, hash.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "param/param_layout.h"
#include "zero/shard_copy.h"
#include "zero/shard_layout.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

TEST(ShardLayout, SizesOffsetsAndGroupsForFourRanks) {
  const ParamLayout pl(test::tiny_config(false));
  const ShardLayout L(pl, 4);
  ASSERT_EQ(L.world_size(), 4);
  ASSERT_EQ(L.num_tensors(), pl.num_params());
  ASSERT_EQ(L.num_groups(), 4);  // embedding, 2 layers, final norm + lm_head
  // embed [97, 40] = 3880 -> padded to 3904 (multiple of 64) -> 976 per rank.
  const ShardTensor& e = L.tensor(pl.embed());
  EXPECT_EQ(e.name, "model.embed_tokens.weight");
  EXPECT_EQ(e.numel, 3880);
  EXPECT_EQ(e.shard_elems, 976);
  EXPECT_EQ(e.shard_offset, 0);
  EXPECT_EQ(e.valid(0), 976);
  EXPECT_EQ(e.valid(3), 3880 - 3 * 976);  // 952: the last shard holds 24 padding elements
  // q_proj.bias [40] -> 64 -> 16 per rank: ranks 0, 1 full, rank 2 holds 8, rank 3 only padding.
  const ShardTensor& qb = L.tensor(pl.layer(0).q.b);
  EXPECT_EQ(qb.name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(qb.shard_elems, 16);
  EXPECT_EQ(qb.valid(1), 16);
  EXPECT_EQ(qb.valid(2), 8);
  EXPECT_EQ(qb.valid(3), 0);
  EXPECT_TRUE(qb.no_decay);
  EXPECT_FALSE(L.tensor(pl.layer(0).q.w).no_decay);
  // Every shard a multiple of the quantum, offsets the running sum, groups contiguous.
  int64_t off = 0;
  for (int i = 0; i < L.num_tensors(); ++i) {
    const ShardTensor& t = L.tensor(i);
    EXPECT_EQ(t.shard_elems % ShardLayout::kShardQuantum, 0) << t.name;
    EXPECT_GE(t.shard_elems * 4, t.numel) << t.name;
    EXPECT_LT(t.shard_elems * 4 - t.numel, 64) << t.name;
    EXPECT_EQ(t.shard_offset, off) << t.name;
    EXPECT_EQ(t.model_offset, pl.param(i).offset) << t.name;
    EXPECT_GE(i, L.tensor_begin(t.group));
    EXPECT_LT(i, L.tensor_end(t.group));
    off += t.shard_elems;
  }
  EXPECT_EQ(L.shard_elems(), off);
  EXPECT_EQ(L.group_shard_begin(0), 0);
  EXPECT_EQ(L.group_shard_end(0), 976);
  EXPECT_EQ(L.group_shard_end(3), L.shard_elems());
  // The head group: model.norm.weight (16) + lm_head (976).
  EXPECT_EQ(L.group_shard_elems(3), 16 + 976);
  EXPECT_EQ(L.group_model_begin(1), pl.group_begin(1));
  EXPECT_EQ(L.group_model_end(3), pl.total_elems());
  int64_t largest = 0;
  for (int g = 0; g < 4; ++g) largest = std::max(largest, L.group_shard_elems(g));
  EXPECT_EQ(L.max_group_shard_elems(), largest);
}

TEST(ShardLayout, TiedEmbeddingIsOneTensor) {
  const ParamLayout pl(test::tiny_config(true));
  const ShardLayout L(pl, 2);
  int embeds = 0;
  for (const ShardTensor& t : L.tensors()) embeds += t.name == "model.embed_tokens.weight";
  EXPECT_EQ(embeds, 1);
  EXPECT_EQ(L.num_tensors(), ParamLayout(test::tiny_config(false)).num_params() - 1);
  EXPECT_EQ(L.group_shard_elems(L.num_groups() - 1), 32);  // only model.norm.weight: 40 -> 64 / 2
}

TEST(ShardLayout, OneRankHoldsEverythingPaddedTo16) {
  const ParamLayout pl(test::tiny_config(false));
  const ShardLayout L(pl, 1);
  for (const ShardTensor& t : L.tensors()) {
    EXPECT_EQ(t.shard_elems, (t.numel + 15) / 16 * 16) << t.name;
    EXPECT_EQ(t.valid(0), t.numel) << t.name;
  }
}

TEST(ShardLayout, HashDependsOnWorldSizeAndModelOnly) {
  const ParamLayout a(test::tiny_config(false)), tied(test::tiny_config(true));
  EXPECT_EQ(ShardLayout(a, 2).hash(), ShardLayout(ParamLayout(test::tiny_config(false)), 2).hash());
  EXPECT_NE(ShardLayout(a, 2).hash(), ShardLayout(a, 4).hash());
  EXPECT_NE(ShardLayout(a, 2).hash(), ShardLayout(tied, 2).hash());
}

TEST(ShardLayout, RejectsWorldSizeZero) {
  const ParamLayout pl(test::tiny_config(false));
  try {
    ShardLayout(pl, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "zero: world size 0 must be >= 1");
  }
}

// ShardCopy::pack_add (W = 1): the shard's group columns += the group's gradient, padding kept;
// bitwise pack into a zeroed bucket followed by Ops::add(shard, shard, bucket), group by group.
TEST(ShardCopy, PackAddIsPackIntoABucketThenAdd) {
  const ParamLayout pl(test::tiny_config(true));
  const ShardLayout L(pl, 1);
  CpuOps ops;
  const ShardCopy copy(L, ops);
  const int64_t S = L.shard_elems();
  std::vector<float> a(static_cast<size_t>(S)), b(static_cast<size_t>(S));
  for (int g = 0; g < L.num_groups(); ++g) {
    const int64_t n = L.group_model_end(g) - L.group_model_begin(g);
    std::vector<float> g1(static_cast<size_t>(n)), g2(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {  // values whose fp32 sums round
      g1[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i % 97) + 1e-3f;
      g2[static_cast<size_t>(i)] = 1.0f / static_cast<float>(3 + i % 89);
    }
    // a: the first micro-step packs, the second packs into a bucket and adds (the old path).
    copy.pack(g, {g1.data(), DType::kF32}, {a.data(), DType::kF32, 0, 0}, 0, 1, {});
    const int64_t b0 = L.group_shard_begin(g), e0 = L.group_shard_end(g);
    std::vector<float> bucket(static_cast<size_t>(e0 - b0), -7.0f);
    copy.pack(g, {g2.data(), DType::kF32}, {bucket.data(), DType::kF32, 0, b0}, 0, 1, {});
    const Tensor sh(a.data() + b0, DType::kF32, {e0 - b0}, Device::kCPU);
    ops.add(sh, sh, Tensor(bucket.data(), DType::kF32, {e0 - b0}, Device::kCPU), {});
    // b: the first micro-step packs, the second adds in place.
    copy.pack(g, {g1.data(), DType::kF32}, {b.data(), DType::kF32, 0, 0}, 0, 1, {});
    copy.pack_add(g, {g2.data(), DType::kF32}, {b.data(), DType::kF32, 0, 0}, {});
  }
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  // Not trivially equal: sums landed, and the padding of the tied embedding stayed 0.
  const ShardTensor& e = L.tensor(pl.embed());
  EXPECT_EQ(b[1], 0.1f * 1 + 1e-3f + 1.0f / 4);
  ASSERT_LT(e.valid(0), e.shard_elems);
  EXPECT_EQ(b[static_cast<size_t>(e.shard_offset + e.valid(0))], 0.0f);
  // Only one rank.
  const ShardLayout L2(pl, 2);
  const ShardCopy copy2(L2, ops);
  EXPECT_THROW(copy2.pack_add(0, {b.data(), DType::kF32}, {a.data(), DType::kF32, 0, 0}, {}),
               Error);
}

}  // namespace
}  // namespace zt::zero
