// AdamW against torch.optim.AdamW, bit for bit (goldens: tools/make_optim_goldens.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/json.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/master_split.h"

namespace zt::optim {
namespace {

const std::string kDir = std::string(ZT_TEST_DATA) + "/optim/";

Json load_json(const std::string& name) {
  std::ifstream in(kDir + name);
  EXPECT_TRUE(in.good()) << kDir + name;
  return Json::parse(in);
}

// adamw.bin: arrays referenced from adamw.json by byte offset and element count.
class Blob {
 public:
  explicit Blob(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  template <typename T>
  std::vector<T> get(const Json& ref) const {
    const size_t off = ref.at("offset_bytes"), n = ref.at("count");
    EXPECT_LE(off + n * sizeof(T), bytes_.size());
    std::vector<T> v(n);
    std::memcpy(v.data(), bytes_.data() + off, n * sizeof(T));
    return v;
  }

 private:
  std::vector<char> bytes_;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Index of the first element whose bits differ, or -1.
long first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i])) return static_cast<long>(i);
  return -1;
}

// The builds of the CPU loop this machine runs (generic always; AVX2 / AVX-512 when present).
std::vector<AdamWBuild> runnable_builds() {
  std::vector<AdamWBuild> out;
  float x = 0;
  uint16_t b = 0;
  const AdamWStep s = adamw_step(AdamWParams{}, 1e-3, 1, 1.0f);
  for (AdamWBuild build : {AdamWBuild::kGeneric, AdamWBuild::kAvx2, AdamWBuild::kAvx512}) {
    float p = 0, m = 0, v = 0;
    if (adamw_cpu_build(build, s, &p, &m, &v, &x, 1, &b)) out.push_back(build);
  }
  return out;
}

TEST(AdamW, MatchesTorchBitwiseOverSeveralSteps) {
  const Json doc = load_json("adamw.json");
  const Blob blob(kDir + "adamw.bin");
  ASSERT_EQ(doc.at("cases").size(), 3u);
  const std::vector<AdamWBuild> builds = runnable_builds();
  ASSERT_FALSE(builds.empty());
  for (size_t bi = 0; bi < builds.size() * doc.at("cases").size(); ++bi) {
    const AdamWBuild build = builds[bi / doc.at("cases").size()];
    const Json& c = doc.at("cases")[bi % doc.at("cases").size()];
    const std::string name = c.at("name");
    SCOPED_TRACE(name + " build " + std::to_string(static_cast<int>(build)));
    const auto sizes = c.at("sizes").get<std::vector<size_t>>();
    const auto decay = c.at("decay").get<std::vector<bool>>();
    const Json& sch = c.at("schedule");
    LrSchedule schedule{parse_lr_schedule_kind(sch.at("kind").get<std::string>()), c.at("lr"),
                        sch.at("warmup"), sch.at("total")};
    const double max_norm = c.at("max_grad_norm");
    const int64_t start_step = c.at("start_step");
    std::vector<std::vector<float>> p, m, v;
    for (size_t t = 0; t < sizes.size(); ++t) {
      p.push_back(blob.get<float>(c.at("p0")[t]));
      m.emplace_back(sizes[t], 0.0f);
      v.emplace_back(sizes[t], 0.0f);
    }
    std::vector<std::vector<uint16_t>> pb(sizes.size());
    const auto& steps = c.at("steps");
    for (size_t k = 0; k < steps.size(); ++k) {
      SCOPED_TRACE("step " + std::to_string(k));
      const Json& st = steps[k];
      // The lr torch used is transformers' schedule value at this step, to the bit.
      const double lr = schedule.lr(static_cast<int64_t>(k));
      ASSERT_EQ(lr, st.at("lr").get<double>());
      // The clip coefficient from torch's fp32 norm equals the one torch applied.
      const float coef = clip_coefficient(st.at("total_norm_f32").get<double>(), max_norm);
      ASSERT_EQ(bits(coef), bits(st.at("clip_coef_f32").get<float>()));
      for (size_t t = 0; t < sizes.size(); ++t) {
        AdamWParams hp{c.at("beta1"), c.at("beta2"), c.at("eps"),
                       decay[t] ? c.at("weight_decay").get<double>() : 0.0};
        const AdamWStep s = adamw_step(hp, lr, start_step + static_cast<int64_t>(k) + 1, coef);
        const std::vector<float> g = blob.get<float>(st.at("grads")[t]);
        pb[t].assign(sizes[t], 0);
        ASSERT_TRUE(adamw_cpu_build(build, s, p[t].data(), m[t].data(), v[t].data(), g.data(),
                                    sizes[t], pb[t].data()));
        EXPECT_EQ(first_diff(p[t], blob.get<float>(st.at("p")[t])), -1) << "p of tensor " << t;
        EXPECT_EQ(first_diff(m[t], blob.get<float>(st.at("m")[t])), -1) << "m of tensor " << t;
        EXPECT_EQ(first_diff(v[t], blob.get<float>(st.at("v")[t])), -1) << "v of tensor " << t;
      }
    }
    // The compute weights round ties away from zero (master_split.h); torch's .to(bfloat16) rounds
    // them to even: the same bits except on an exact tie.
    for (size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<uint16_t> torch_bf16 = blob.get<uint16_t>(c.at("p_bf16_final")[t]);
      ASSERT_EQ(torch_bf16.size(), pb[t].size());
      for (size_t i = 0; i < pb[t].size(); ++i) {
        const bool tie = (bits(p[t][i]) & 0xffffu) == 0x8000u;
        EXPECT_EQ(pb[t][i], master_hi(p[t][i])) << "tensor " << t << " element " << i;
        if (!tie) {
          EXPECT_EQ(pb[t][i], torch_bf16[i]) << "tensor " << t << " element " << i;
        }
      }
    }
  }
}

TEST(AdamW, GoldensExerciseClippingDecayAndBothLerpBranches) {
  // Guards the goldens themselves: a clipped step, an unclipped one, decay on, beta1 < 0.5.
  const Json doc = load_json("adamw.json");
  bool clipped = false, unclipped = false, small_beta1 = false, decayed = false;
  for (const Json& c : doc.at("cases")) {
    small_beta1 |= c.at("beta1").get<double>() < 0.5;
    decayed |= c.at("weight_decay").get<double>() > 0;
    for (const Json& st : c.at("steps")) {
      const float coef = st.at("clip_coef_f32");
      clipped |= coef < 1.0f;
      unclipped |= coef == 1.0f;
    }
  }
  EXPECT_TRUE(clipped && unclipped && small_beta1 && decayed);
}

// The FMA in the lerp is what torch does: a non-fused m + w*(g-m) differs on these values.
TEST(AdamW, LerpIsOneFusedMultiplyAdd) {
  AdamWParams hp;  // beta1 0.9: weight 0.1, the |w| < 0.5 branch
  const AdamWStep s = adamw_step(hp, 1e-3, 1, 1.0f);
  EXPECT_TRUE(s.lerp_from_m);
  EXPECT_EQ(s.lerp_coef, 0.1f);
  int fused_differs = 0;
  for (int i = 0; i < 1000; ++i) {
    float p = 1.0f, m = 1e-3f * static_cast<float>(i % 37) - 0.01f, v = 1e-4f;
    const float g = 0.013f * static_cast<float>(i) - 3.1f;
    const float m0 = m;
    adamw_element(s, p, m, v, g);
    const float unfused = m0 + s.lerp_coef * (g - m0);
    EXPECT_EQ(bits(m), bits(std::fma(s.lerp_coef, g - m0, m0)));
    fused_differs += bits(m) != bits(unfused);
  }
  EXPECT_GT(fused_differs, 0);
}

TEST(AdamW, StepScalarsFollowTorchsPythonMaths) {
  AdamWParams hp{0.9, 0.999, 1e-8, 0.1};
  const AdamWStep s = adamw_step(hp, 2e-5, 3, 0.5f);
  EXPECT_TRUE(s.decay);
  EXPECT_EQ(s.decay_factor, static_cast<float>(1.0 - 2e-5 * 0.1));
  EXPECT_EQ(s.one_minus_beta2, static_cast<float>(1.0 - 0.999));
  EXPECT_EQ(s.bias_correction2_sqrt, static_cast<float>(std::pow(1.0 - std::pow(0.999, 3.0), 0.5)));
  EXPECT_EQ(s.neg_step_size, static_cast<float>(-(2e-5 / (1.0 - std::pow(0.9, 3.0)))));
  EXPECT_EQ(s.grad_scale, 0.5f);
  EXPECT_FALSE(adamw_step(AdamWParams{}, 2e-5, 1, 1.0f).decay);
  const AdamWStep big = adamw_step(AdamWParams{0.3, 0.999, 1e-8, 0.0}, 1e-3, 1, 1.0f);
  EXPECT_FALSE(big.lerp_from_m);
  EXPECT_EQ(big.lerp_coef, static_cast<float>(1.0 - 0.3) - 1.0f);
}

TEST(AdamW, RejectsWhatTorchRejects) {
  EXPECT_THROW(adamw_step(AdamWParams{1.0, 0.999, 1e-8, 0}, 1e-3, 1, 1.0f), Error);
  EXPECT_THROW(adamw_step(AdamWParams{0.9, 0.999, -1.0, 0}, 1e-3, 1, 1.0f), Error);
  EXPECT_THROW(adamw_step(AdamWParams{0.9, 0.999, 1e-8, -0.1}, 1e-3, 1, 1.0f), Error);
  EXPECT_THROW(adamw_step(AdamWParams{}, -1e-3, 1, 1.0f), Error);
  try {
    adamw_step(AdamWParams{}, 1e-3, 0, 1.0f);
    FAIL() << "step 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 0"), std::string::npos) << e.what();
  }
}

// Every build of the threaded, vectorised loop equals the element formula on a size that takes
// the parallel path and has a ragged tail, with and without the bf16 copy.
TEST(AdamW, CpuBuildsEqualElementFormulaOnLargeShard) {
  const size_t n = (1 << 17) + 13;
  std::vector<float> p0(n), m0(n), v0(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    p0[i] = std::sin(static_cast<float>(i)) * 0.3f;
    m0[i] = std::cos(static_cast<float>(i) * 0.7f) * 1e-3f;
    v0[i] = 1e-6f * static_cast<float>(i % 101);
    g[i] = std::sin(static_cast<float>(i) * 1.3f) * 1e-2f;
  }
  p0[5] = NAN;  // NaN travels through both paths alike
  g[7] = INFINITY;
  for (const AdamWParams& hp :
       {AdamWParams{0.9, 0.95, 1e-8, 0.01}, AdamWParams{0.3, 0.999, 1e-6, 0}}) {
    const AdamWStep s = adamw_step(hp, 3e-4, 7, 0.75f);
    std::vector<float> pr = p0, mr = m0, vr = v0;
    for (size_t i = 0; i < n; ++i) adamw_element(s, pr[i], mr[i], vr[i], g[i]);
    for (AdamWBuild build : runnable_builds()) {
      SCOPED_TRACE("build " + std::to_string(static_cast<int>(build)) + " beta1 " +
                   std::to_string(hp.beta1));
      std::vector<float> p = p0, m = m0, v = v0;
      std::vector<uint16_t> pb(n);
      ASSERT_TRUE(adamw_cpu_build(build, s, p.data(), m.data(), v.data(), g.data(), n, pb.data()));
      EXPECT_EQ(first_diff(p, pr), -1);
      EXPECT_EQ(first_diff(m, mr), -1);
      EXPECT_EQ(first_diff(v, vr), -1);
      size_t bad_bf16 = 0;
      for (size_t i = 0; i < n; ++i) bad_bf16 += pb[i] != master_hi(pr[i]);
      EXPECT_EQ(bad_bf16, 0u);
      std::vector<float> p2 = p0, m2 = m0, v2 = v0;
      ASSERT_TRUE(adamw_cpu_build(build, s, p2.data(), m2.data(), v2.data(), g.data(), n, nullptr));
      EXPECT_EQ(first_diff(p2, pr), -1);
    }
  }
  // adamw_cpu runs the best build: same bits.
  const AdamWStep s = adamw_step(AdamWParams{}, 1e-3, 2, 1.0f);
  std::vector<float> p = p0, m = m0, v = v0, pr = p0, mr = m0, vr = v0;
  adamw_cpu(s, p.data(), m.data(), v.data(), g.data(), n);
  for (size_t i = 0; i < n; ++i) adamw_element(s, pr[i], mr[i], vr[i], g[i]);
  EXPECT_EQ(first_diff(p, pr), -1);
}

// The split master (master_split.h): (master_hi, master_lo) → master_join is the identity on every
// non-NaN fp32 (sampled: every exponent and sign, the low halves around the rounding point, the
// extremes), rounds to nearest with ties away from zero, differs from round-to-even only on ties,
// and keeps NaN a NaN.
TEST(MasterSplit, JoinInvertsTheSplitAndRoundsTiesAway) {
  std::vector<uint32_t> us;
  for (uint32_t hi = 0; hi < 0x10000u; hi += 7)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xfffeu, 0xffffu, 0x1234u})
      us.push_back(hi << 16 | lo);
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u,
                     0xff800000u, 0x00008000u, 0x0000ffffu, 0x3f808000u, 0x3f818000u})
    us.push_back(u);
  size_t ties = 0, differ = 0;
  for (uint32_t u : us) {
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t hi = master_hi(f), lo = master_lo(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(master_join(hi, lo))) << std::hex << u;
      EXPECT_EQ(hi, f32_to_bf16(f)) << std::hex << u;
      continue;
    }
    ASSERT_EQ(bits(master_join(hi, lo)), u) << std::hex << u;
    // Nearest: |f − hi| ≤ |f − either neighbour|, ties away from zero.
    const float h = bf16_to_f32(hi);
    const bool tie = (u & 0xffffu) == 0x8000u;
    if (tie) {
      EXPECT_GT(std::fabs(h), std::fabs(f)) << std::hex << u;
    }
    ties += tie;
    if (hi != f32_to_bf16(f)) {
      ++differ;
      EXPECT_TRUE(tie) << std::hex << u;
    }
  }
  EXPECT_GT(ties, 1000u);
  EXPECT_GT(differ, 500u);  // the even halves of the ties
  EXPECT_LT(differ, ties);
}

// adamw_split_cpu (every build) = adamw_cpu with p_bf16 on the joined master: the same m, v, the
// same compute weights (hi), and hi / lo joining to adamw_cpu's new p.
TEST(AdamWSplit, EveryBuildMatchesTheFp32Update) {
  const size_t n = (1 << 17) + 13;
  std::vector<uint16_t> hi0(n), lo0(n);
  std::vector<float> p0(n), m0(n), v0(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = std::sin(static_cast<float>(i)) * 0.3f;
    hi0[i] = master_hi(x);
    lo0[i] = static_cast<uint16_t>((i * 40503u) & 0xffffu);  // any low half, ties included
    p0[i] = master_join(hi0[i], lo0[i]);
    m0[i] = std::cos(static_cast<float>(i) * 0.7f) * 1e-3f;
    v0[i] = 1e-6f * static_cast<float>(i % 101);
    g[i] = std::sin(static_cast<float>(i) * 1.3f) * 1e-2f;
  }
  for (const AdamWParams& hp :
       {AdamWParams{0.9, 0.95, 1e-8, 0.01}, AdamWParams{0.3, 0.999, 1e-6, 0}}) {
    const AdamWStep s = adamw_step(hp, 3e-4, 7, 0.75f);
    std::vector<float> pr = p0, mr = m0, vr = v0;
    std::vector<uint16_t> pbr(n);
    adamw_cpu(s, pr.data(), mr.data(), vr.data(), g.data(), n, pbr.data());
    for (AdamWBuild build : runnable_builds()) {
      SCOPED_TRACE("build " + std::to_string(static_cast<int>(build)));
      std::vector<uint16_t> hi = hi0, lo = lo0;
      std::vector<float> m = m0, v = v0;
      ASSERT_TRUE(
          adamw_split_cpu_build(build, s, hi.data(), lo.data(), m.data(), v.data(), g.data(), n));
      EXPECT_EQ(hi, pbr);
      std::vector<float> joined(n);
      for (size_t i = 0; i < n; ++i) joined[i] = master_join(hi[i], lo[i]);
      EXPECT_EQ(first_diff(joined, pr), -1);
      EXPECT_EQ(first_diff(m, mr), -1);
      EXPECT_EQ(first_diff(v, vr), -1);
    }
    std::vector<uint16_t> hi = hi0, lo = lo0;  // adamw_split_cpu: the best build, same bits
    std::vector<float> m = m0, v = v0;
    adamw_split_cpu(s, hi.data(), lo.data(), m.data(), v.data(), g.data(), n);
    EXPECT_EQ(hi, pbr);
  }
}

}  // namespace
}  // namespace zt::optim
