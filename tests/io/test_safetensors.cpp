// safetensors read/write against files written by Python `safetensors` and transformers
// `save_pretrained` (tests/data/io, made by tools/make_io_goldens.py).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace {

using zt::DType;
using zt::NamedTensor;
using zt::SafetensorsReader;
using zt::testing::error_of;
using zt::testing::expect_error;
using zt::testing::TempDir;
namespace fs = std::filesystem;

const fs::path kData = fs::path(ZT_TEST_DATA) / "io";

zt::Json load_json(const fs::path& p) { return zt::Json::parse(zt::read_file(p)); }

// The tensors of mixed.json as raw byte buffers + NamedTensors pointing at them.
struct MixedSet {
  std::vector<std::vector<std::byte>> buffers;
  std::vector<NamedTensor> tensors;
};

MixedSet mixed_from_json(const zt::Json& desc) {
  MixedSet m;
  m.buffers.reserve(desc.size());
  for (const auto& [name, d] : desc.items()) {
    const DType t = *zt::dtype_from_safetensors(d["dtype"].get<std::string>());
    const size_t es = zt::dtype_size(t);
    std::vector<std::byte> buf(d["bits"].size() * es);
    for (size_t i = 0; i < d["bits"].size(); ++i) {
      const uint64_t b = d["bits"][i].get<uint64_t>();
      std::memcpy(buf.data() + i * es, &b, es);  // little-endian host
    }
    m.buffers.push_back(std::move(buf));
    m.tensors.push_back({name, t, d["shape"].get<std::vector<int64_t>>(), m.buffers.back().data()});
  }
  return m;
}

TEST(Safetensors, ReadsPythonFileToExactValues) {
  const zt::Json g = load_json(kData / "mixed.json");
  SafetensorsReader r(kData / "mixed.safetensors");
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.names().size(), g["tensors"].size());
  EXPECT_EQ(r.names().front(), "a.bias");  // sorted
  for (const auto& [name, d] : g["tensors"].items()) {
    const auto& info = r.info(name);
    EXPECT_EQ(info.dtype_str, d["dtype"].get<std::string>()) << name;
    EXPECT_EQ(info.shape, d["shape"].get<std::vector<int64_t>>()) << name;
    const auto raw = r.raw(name);
    const size_t es = zt::dtype_size(*info.dtype);
    ASSERT_EQ(raw.size(), d["bits"].size() * es) << name;
    for (size_t i = 0; i < d["bits"].size(); ++i) {
      uint64_t got = 0;
      std::memcpy(&got, raw.data() + i * es, es);
      EXPECT_EQ(got, d["bits"][i].get<uint64_t>()) << name << "[" << i << "]";
    }
  }
  // Typed loads: the fp32 specials exactly, bf16 / f16 widened exactly.
  const std::vector<float> sp = r.load_f32("model.special_f32");
  EXPECT_EQ(sp[3], -2.5f);
  EXPECT_EQ(sp[6], -65504.0f);
  EXPECT_TRUE(std::isinf(sp[8]) && sp[8] > 0);
  EXPECT_TRUE(std::signbit(sp[1]));
  const std::vector<float> wb = r.load_f32("model.w_bf16");
  const uint64_t b0 = g["tensors"]["model.w_bf16"]["bits"][0].get<uint64_t>();
  EXPECT_EQ(wb[0], zt::bf16_to_f32(static_cast<uint16_t>(b0)));
  const std::vector<float> wh = r.load_f32("model.w_f16");
  const uint64_t h5 = g["tensors"]["model.w_f16"]["bits"][5].get<uint64_t>();
  EXPECT_EQ(wh[5], zt::f16_to_f32(static_cast<uint16_t>(h5)));
  int64_t ids[4];
  r.load("ids_i64", DType::kI64, std::vector<int64_t>{2, 2}, ids);
  EXPECT_EQ(ids[2], int64_t{1} << 40);
  EXPECT_EQ(ids[3], -(int64_t{1} << 50));
  float s = 0;
  r.load("scalar", DType::kF32, {}, &s);
  EXPECT_EQ(s, 0.5f);
  EXPECT_EQ(r.info("empty").numel(), 0);
}

TEST(Safetensors, ConvertsOnLoad) {
  SafetensorsReader r(kData / "mixed.safetensors");
  // F32 file -> BF16 destination: RNE, same as f32_to_bf16.
  const std::vector<float> w = r.load_f32("model.w_f32");
  std::vector<uint16_t> wb(15);
  zt::Tensor dst(wb.data(), DType::kBF16, {3, 5});
  r.load("model.w_f32", dst);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(wb[i], zt::f32_to_bf16(w[i]));
  // F16 file -> BF16 destination.
  std::vector<uint16_t> hb(6);
  r.load("model.w_f16", DType::kBF16, std::vector<int64_t>{2, 3}, hb.data());
  const std::vector<float> h = r.load_f32("model.w_f16");
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(hb[i], zt::f32_to_bf16(h[i]));
}

TEST(Safetensors, WriteIsByteIdenticalToPython) {
  const zt::Json g = load_json(kData / "mixed.json");
  const MixedSet m = mixed_from_json(g["tensors"]);
  TempDir d;
  zt::write_safetensors(d / "ours.safetensors", m.tensors, {{"format", "pt"}});
  const std::string ours = zt::read_file(d / "ours.safetensors");
  const std::string python = zt::read_file(kData / "mixed.safetensors");
  EXPECT_EQ(ours.size(), python.size());
  EXPECT_TRUE(ours == python) << "header ours:   " << ours.substr(8, 200)
                              << "\nheader python: " << python.substr(8, 200);
}

TEST(Safetensors, WriteThenReadIsBitwise) {
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.37f - 100.0f;
  a[7] = -0.0f;
  std::vector<uint16_t> b = {0x3F80, 0xFF80, 0x0001, 0x7FC0};
  std::vector<int32_t> c = {-1, 2, 3};
  const std::vector<NamedTensor> ts = {
      {"z.a", DType::kF32, {10, 100}, a.data()},
      {"b", DType::kBF16, {2, 2}, b.data()},
      {"c", DType::kI32, {3}, c.data()},
      {"a.as_bf16", DType::kF32, {1000}, a.data(), DType::kBF16},  // converted while writing
      {"\xc3\xa9t\xc3\xa9", DType::kF32, {0}, nullptr},            // UTF-8 name, empty
  };
  TempDir d;
  zt::write_safetensors(d / "x.safetensors", ts, {{"format", "pt"}, {"note", "q\"uote\n"}});
  SafetensorsReader r(d / "x.safetensors");
  EXPECT_EQ(r.metadata().at("note"), "q\"uote\n");
  EXPECT_EQ(r.names(),
            (std::vector<std::string>{"a.as_bf16", "b", "c", "z.a", "\xc3\xa9t\xc3\xa9"}));
  const auto ra = r.raw("z.a");
  ASSERT_EQ(ra.size(), 4000u);
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), 4000), 0);
  EXPECT_EQ(std::memcmp(r.raw("b").data(), b.data(), 8), 0);
  EXPECT_EQ(std::memcmp(r.raw("c").data(), c.data(), 12), 0);
  EXPECT_EQ(r.info("a.as_bf16").dtype_str, "BF16");
  std::vector<uint16_t> conv(1000);
  std::memcpy(conv.data(), r.raw("a.as_bf16").data(), 2000);
  for (size_t i = 0; i < 1000; ++i) EXPECT_EQ(conv[i], zt::f32_to_bf16(a[i]));
  EXPECT_EQ(r.info("\xc3\xa9t\xc3\xa9").shape, (std::vector<int64_t>{0}));
  // The header is padded to 8 bytes with spaces; data order is F32, I32, BF16 (then name).
  const std::string file = zt::read_file(d / "x.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_LT(file.find("\"z.a\""), file.find("\"c\""));
  EXPECT_LT(file.find("\"c\""), file.find("\"a.as_bf16\""));
  EXPECT_LT(file.find("\"a.as_bf16\""), file.find("\"b\""));
  const std::string want = R"({"z.a":{"dtype":"F32","shape":[10,100],"data_offsets":[0,4000]},)";
  EXPECT_EQ(zt::safetensors_header(ts, {}).substr(0, want.size()), want);
}

TEST(Safetensors, ReadsShardedCheckpointOfTransformers) {
  const zt::Json g = load_json(kData / "tiny_qwen2.json");
  for (const char* sub : {"tiny_qwen2_f32", "tiny_qwen2_bf16"}) {
    SafetensorsReader r(kData / sub);  // directory -> model.safetensors.index.json
    EXPECT_EQ(r.files().size(), std::string(sub).ends_with("f32") ? 4u : 2u);
    EXPECT_EQ(r.metadata().at("format"), "pt");
    EXPECT_EQ(r.index_metadata()["total_parameters"].get<int64_t>(), 5008);
    EXPECT_EQ(r.names().size(), g["state_dict_order"].size());
    const bool bf16 = std::string(sub).ends_with("bf16");
    for (const auto& [name, d] : g["tensors"].items()) {
      EXPECT_EQ(r.info(name).dtype_str, bf16 ? "BF16" : "F32");
      EXPECT_EQ(r.info(name).shape, d["shape"].get<std::vector<int64_t>>());
      const std::vector<float> v = r.load_f32(name);
      ASSERT_EQ(v.size(), d["bits"].size());
      for (size_t i = 0; i < v.size(); ++i) {
        uint32_t u = d["bits"][i].get<uint32_t>();
        float want;
        std::memcpy(&want, &u, 4);
        if (bf16) want = zt::bf16_to_f32(zt::f32_to_bf16(want));  // torch .to(bfloat16) is RNE
        ASSERT_EQ(v[i], want) << sub << " " << name << "[" << i << "]";
      }
    }
  }
}

TEST(Safetensors, ShardedWriteMatchesSavePretrained) {
  const zt::Json g = load_json(kData / "tiny_qwen2.json");
  std::vector<std::vector<float>> bufs;
  std::vector<NamedTensor> ts;
  bufs.reserve(g["state_dict_order"].size());
  for (const auto& n : g["state_dict_order"]) {
    const std::string name = n.get<std::string>();
    const auto& d = g["tensors"][name];
    std::vector<float> v(d["bits"].size());
    for (size_t i = 0; i < v.size(); ++i) {
      const uint32_t u = d["bits"][i].get<uint32_t>();
      std::memcpy(&v[i], &u, 4);
    }
    bufs.push_back(std::move(v));
    ts.push_back({name, DType::kF32, d["shape"].get<std::vector<int64_t>>(), bufs.back().data()});
  }
  const size_t max_shard = g["max_shard_size"].get<size_t>();
  for (const char* sub : {"tiny_qwen2_f32", "tiny_qwen2_bf16"}) {
    const bool bf16 = std::string(sub).ends_with("bf16");
    for (auto& t : ts) t.store_as = bf16 ? std::optional(DType::kBF16) : std::nullopt;
    TempDir d;
    zt::Json extra = zt::Json::object();
    extra["total_parameters"] = 5008;
    const auto res = zt::write_safetensors_sharded(d.path(), ts, max_shard, extra);
    EXPECT_TRUE(res.sharded);
    EXPECT_EQ(res.total_size, bf16 ? 10016u : 20032u);
    std::vector<std::string> want_files;
    for (const auto& f : zt::testing::list_dir(kData / sub))
      if (f.starts_with("model")) want_files.push_back(f);
    std::vector<std::string> got = res.files;
    got.push_back("model.safetensors.index.json");
    EXPECT_EQ(got, want_files) << sub;
    for (const auto& f : want_files)
      EXPECT_TRUE(zt::read_file(d / f) == zt::read_file(kData / sub / f)) << sub << "/" << f;
  }
  // One shard: a single model.safetensors and no index.
  TempDir d;
  const auto res = zt::write_safetensors_sharded(d.path(), ts, zt::kDefaultMaxShardSize);
  EXPECT_FALSE(res.sharded);
  EXPECT_EQ(zt::testing::list_dir(d.path()), std::vector<std::string>{"model.safetensors"});
}

TEST(Safetensors, PlansShardsLikeHuggingfaceHub) {
  std::vector<NamedTensor> ts;
  for (int64_t n : {10, 30, 100, 20, 25, 5}) {
    std::string name = "t";
    name += std::to_string(n);
    ts.push_back({name, DType::kU8, {n}, nullptr});
  }
  // limit 50: [10,30] | [100] alone (emitted before the open shard closes) | … per the hub code:
  // 10+30=40; 100>50 -> own shard appended first; 20 -> 60>50 closes [10,30]; 20+25=45; 5 -> 50.
  const auto p = zt::plan_shards(ts, 50);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], (std::vector<size_t>{2}));
  EXPECT_EQ(p[1], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p[2], (std::vector<size_t>{3, 4, 5}));
}

// ---- bad input

std::string mixed_bytes() { return zt::read_file(kData / "mixed.safetensors"); }

// A file with the given header JSON and `data_bytes` zero bytes of data.
void write_raw(const fs::path& p, const std::string& header, size_t data_bytes) {
  std::string f(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  f += header;
  f.append(data_bytes, '\0');
  zt::write_file_atomic(p, f);
}

TEST(Safetensors, MissingTensorAndShapeMismatchAreNamed) {
  SafetensorsReader r(kData / "mixed.safetensors");
  float buf[16];
  expect_error([&] { r.load("model.nope", DType::kF32, std::vector<int64_t>{2}, buf); },
               {"mixed.safetensors: tensor 'model.nope' not found (10 tensors"});
  expect_error(
      [&] {
        r.load("model.w_f32", DType::kF32, std::vector<int64_t>{5, 3}, buf);
      },
      {"mixed.safetensors: tensor 'model.w_f32' has shape [3, 5] in the file, expected [5, 3]"});
  expect_error([&] { r.load("ids_i32", DType::kF32, std::vector<int64_t>{4}, buf); },
               {"tensor 'ids_i32' is I32 in the file and cannot be loaded as F32"});
}

TEST(Safetensors, TruncatedFileIsAnError) {
  TempDir d;
  const std::string full = mixed_bytes();
  zt::write_file_atomic(d / "cut.safetensors", std::string_view(full).substr(0, full.size() - 3));
  expect_error([&] { SafetensorsReader r(d / "cut.safetensors"); },
               {"cut.safetensors: tensor 'bytes_u8': data_offsets [226, 229] end past the data "
                "section (226 bytes); truncated?"});
  zt::write_file_atomic(d / "cut2.safetensors", std::string_view(full).substr(0, 100));
  expect_error([&] { SafetensorsReader r(d / "cut2.safetensors"); },
               {"cut2.safetensors: header length 688 exceeds the file size 100 bytes; truncated?"});
  zt::write_file_atomic(d / "cut3.safetensors", "abc");
  expect_error([&] { SafetensorsReader r(d / "cut3.safetensors"); },
               {"file is 3 bytes, shorter than the 8-byte header length"});
}

TEST(Safetensors, UnsupportedDtypeIsNamed) {
  TempDir d;
  write_raw(d / "f8.safetensors",
            R"({"w8":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]},)"
            R"("q":{"dtype":"I8","shape":[4],"data_offsets":[4,8]},)"
            R"("ok":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            12);
  SafetensorsReader r(d / "f8.safetensors");  // opening is fine: only loading these fails
  float buf[4];
  expect_error(
      [&] {
        r.load("w8", DType::kBF16, std::vector<int64_t>{2, 2}, buf);
      },
      {"f8.safetensors: tensor 'w8' has dtype F8_E4M3, which zerotune cannot load",
       "(F32, BF16, F16, I32, I64, U8 are supported)"});
  expect_error([&] { r.load("q", DType::kF32, std::vector<int64_t>{4}, buf); },
               {"tensor 'q' has dtype I8, which zerotune cannot load"});
  EXPECT_EQ(r.load_f32("ok")[0], 0.0f);
  write_raw(d / "bad.safetensors", R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2);
  expect_error([&] { SafetensorsReader x(d / "bad.safetensors"); },
               {"bad.safetensors: tensor 'w': unknown dtype \"Q4\""});
}

TEST(Safetensors, ReadsUnpaddedHeaderWithMisalignedData) {
  // Other writers may not pad the header: the data then starts at an odd address in the mapping.
  TempDir d;
  const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  std::string f(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  f += header;
  const float v[3] = {1.5f, -2.25f, 1e-3f};
  f.append(reinterpret_cast<const char*>(v), 12);
  zt::write_file_atomic(d / "u.safetensors", f);
  SafetensorsReader r(d / "u.safetensors");
  EXPECT_EQ(r.load_f32("w"), (std::vector<float>{1.5f, -2.25f, 1e-3f}));
  uint16_t b[3];
  r.load("w", DType::kBF16, std::vector<int64_t>{3}, b);
  EXPECT_EQ(b[2], zt::f32_to_bf16(1e-3f));
}

TEST(Safetensors, MalformedHeadersAreRejected) {
  TempDir d;
  write_raw(d / "a.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8);
  expect_error([&] { SafetensorsReader x(d / "a.safetensors"); },
               {"tensor 'w': data_offsets [0, 4] hold 4 bytes, shape [2] F32 needs 8"});
  write_raw(
      d / "b.safetensors",
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8);
  expect_error([&] { SafetensorsReader x(d / "b.safetensors"); }, {"overlap"});
  write_raw(d / "c.safetensors", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8);
  expect_error([&] { SafetensorsReader x(d / "c.safetensors"); },
               {"tensor 'w': shape [-2] has a non-integer or negative dimension"});
  // 2^62 F32 elements are 2^64 bytes, 0 modulo 2^64: it passed as an empty tensor.
  write_raw(d / "o.safetensors",
            R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
  expect_error([&] { SafetensorsReader x(d / "o.safetensors"); },
               {"o.safetensors: tensor 'w': shape [4611686018427387904] has more elements than a "
                "file can hold"});
  write_raw(d / "p.safetensors",
            R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  expect_error([&] { SafetensorsReader x(d / "p.safetensors"); },
               {"tensor 'w': shape [4294967296, 4294967296] has more elements"});
  write_raw(d / "e.safetensors", R"({"w":)", 0);
  EXPECT_EQ(error_of([&] { SafetensorsReader x(d / "e.safetensors"); }),
            (d / "e.safetensors").string() +
                ": header is not valid JSON: parse error at line 1, column 6: syntax error while "
                "parsing value - unexpected end of input; expected '[', '{', or a literal");
  expect_error([&] { SafetensorsReader x(d.path()); },
               {"neither model.safetensors nor model.safetensors.index.json"});
}

TEST(Safetensors, BrokenIndexIsNamed) {
  TempDir d;
  fs::copy(kData / "tiny_qwen2_bf16", d / "m");
  zt::Json idx = load_json(d / "m" / "model.safetensors.index.json");
  idx["weight_map"]["model.extra.weight"] = "model-00002-of-00002.safetensors";
  zt::write_file_atomic(d / "m" / "model.safetensors.index.json", idx.dump(2));
  expect_error([&] { SafetensorsReader x(d / "m"); },
               {"weight_map lists tensor 'model.extra.weight' in model-00002-of-00002.safetensors, "
                "which does not contain it"});
  // A shard the index names that is not there: the index, how many tensors and which, the file
  // (it said only "<shard>: cannot open: No such file or directory").
  fs::remove(d / "m" / "model-00002-of-00002.safetensors");
  expect_error(
      [&] { SafetensorsReader x(d / "m" / "model.safetensors.index.json"); },
      {"model.safetensors.index.json: weight_map puts 15 tensor(s) "
       "('model.layers.0.post_attention_layernorm.weight', …) in " +
       (d / "m" / "model-00002-of-00002.safetensors").string() + ", which does not exist"});
}

TEST(Safetensors, WriterRejectsBadInput) {
  float x = 1;
  TempDir d;
  const std::vector<NamedTensor> dup = {{"a", DType::kF32, {1}, &x}, {"a", DType::kF32, {1}, &x}};
  expect_error([&] { zt::write_safetensors(d / "d.safetensors", dup); },
               {"tensor 'a' given twice"});
  const std::vector<NamedTensor> meta = {{"__metadata__", DType::kF32, {1}, &x}};
  expect_error([&] { zt::write_safetensors(d / "d.safetensors", meta); },
               {"\"__metadata__\" cannot name a tensor"});
  const std::vector<NamedTensor> conv = {{"i", DType::kI32, {1}, &x, DType::kBF16}};
  expect_error([&] { zt::write_safetensors(d / "d.safetensors", conv); },
               {"tensor 'i' is I32 and cannot be stored as BF16"});
  EXPECT_TRUE(zt::testing::list_dir(d.path()).empty());
}

}  // namespace
