// CausalLM parameter I/O: from-scratch initialisation, loading an HF checkpoint, and HF-named
// views for export.
#include <cmath>
#include <cstring>
#include <numbers>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "model/causal_lm.h"

namespace zt {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr int64_t kParallelWork = int64_t{1} << 15;  // below this, one thread

// dst[i] ~ N(0, std) from a counter-based stream keyed by (seed, name): Box–Muller on pairs of
// 53-bit uniforms drawn with splitmix64(key + counter). Independent of threads and call order.
void fill_normal(std::span<float> dst, uint64_t seed, std::string_view name, double std) {
  const uint64_t key = splitmix64(seed ^ fnv1a(name));
  const size_t n = dst.size();
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(n) * 16 >= kParallelWork)
  for (size_t j = 0; j < (n + 1) / 2; ++j) {
    const uint64_t r1 = splitmix64(key + 2 * j), r2 = splitmix64(key + 2 * j + 1);
    const double u1 = (static_cast<double>(r1 >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(r2 >> 11) * 0x1.0p-53;          // [0, 1)
    const double rad = std::sqrt(-2.0 * std::log(u1)), ang = 2.0 * std::numbers::pi * u2;
    dst[2 * j] = static_cast<float>(std * rad * std::cos(ang));
    if (2 * j + 1 < n) dst[2 * j + 1] = static_cast<float>(std * rad * std::sin(ang));
  }
}

}  // namespace

void CausalLM::check_flat(const Tensor& flat, std::string_view what, bool host_only) const {
  const int64_t n = layout_.total_elems();
  if (flat.dtype != opt_.dtype || flat.ndim != 1 || flat.shape[0] != n)
    fail(
        "model.{}: the flat weight buffer must be {} [{}] (layout().total_elems()), got {} with "
        "{} dims and {} elements",
        what, dtype_name(opt_.dtype), n, dtype_name(flat.dtype), flat.ndim, flat.numel());
  if (flat.data == nullptr) fail("model.{}: the flat weight buffer has no data", what);
  if (flat.device != Device::kCPU && (host_only || flat.device != device_))
    fail("model.{}: the flat weight buffer must be in host memory{}", what,
         host_only ? "" : " or on the model's device");
}

void CausalLM::init_from_scratch(uint64_t seed) {
  if (!own_)
    fail(
        "model.init_from_scratch: the model has no weights of its own (it uses a caller's "
        "GroupStorage); use init_from_scratch(seed, flat)");
  init_from_scratch(seed, all_weights());
}

void CausalLM::init_from_scratch(uint64_t seed, const Tensor& flat) {
  check_flat(flat, "init_from_scratch", false);
  std::vector<float> host;
  std::vector<uint16_t> half;
  for (int i = 0; i < layout_.num_params(); ++i) {
    const ParamSpec& s = layout_.param(i);
    host.assign(static_cast<size_t>(s.numel), 0.0f);
    if (s.no_decay && s.shape.size() == 1 && s.name.ends_with(".bias")) {
      // Linear bias: zeros.
    } else if (s.no_decay) {
      std::fill(host.begin(), host.end(), 1.0f);  // RMSNorm weight: ones
    } else {
      fill_normal(host, seed, s.name, cfg_.initializer_range);
      if (i == layout_.embed() && !cfg_.pad_token_id.empty()) {
        const int64_t pad = cfg_.pad_token_id.front();
        if (pad >= 0 && pad < cfg_.vocab_size)
          std::fill_n(host.begin() + pad * cfg_.hidden_size, cfg_.hidden_size, 0.0f);
      }
    }
    const Tensor dst = flat_param(flat, i);
    const void* src = host.data();
    if (opt_.dtype != DType::kF32) {
      half.resize(host.size());
      convert_dtype(host.data(), DType::kF32, half.data(), opt_.dtype, host.size());
      src = half.data();
    }
    if (dst.device == Device::kCPU) {
      std::memcpy(dst.data, src, dst.nbytes());
    } else {
      ops_.copy_from_host(dst, src, stream_);
      ops_.synchronize(stream_);
    }
  }
}

void CausalLM::load_weights(const SafetensorsReader& reader) {
  if (!own_)
    fail(
        "model.load_weights: the model has no weights of its own (it uses a caller's "
        "GroupStorage); use load_weights(reader, flat)");
  load_weights(reader, all_weights());
}

void CausalLM::load_weights(const SafetensorsReader& reader, const Tensor& flat) {
  check_flat(flat, "load_weights", false);
  std::vector<std::byte> staging;
  std::set<std::string> used;
  for (int i = 0; i < layout_.num_params(); ++i) {
    const ParamSpec& s = layout_.param(i);
    const Tensor dst = flat_param(flat, i);
    if (dst.device == Device::kCPU) {
      reader.load(s.name, dst);
    } else {
      staging.resize(dst.nbytes());
      reader.load(s.name, dst.dtype, s.shape, staging.data());
      ops_.copy_from_host(dst, staging.data(), stream_);
      ops_.synchronize(stream_);
    }
    used.insert(s.name);
  }
  for (const std::string& n : reader.names())
    if (!used.contains(n))
      log::info("{}: tensor '{}' is not a parameter of this {} model; ignored",
                reader.path().string(), n, cfg_.model_type);
}

std::vector<NamedTensor> CausalLM::named_weights() const {
  if (!own_)
    fail(
        "model.named_weights: the model has no weights of its own (it uses a caller's "
        "GroupStorage); use named_weights(flat)");
  if (device_ != Device::kCPU) fail("named_weights: the weights are not in host memory");
  return named_weights(all_weights());
}

std::vector<NamedTensor> CausalLM::named_weights(const Tensor& flat) const {
  check_flat(flat, "named_weights", true);
  std::vector<NamedTensor> out;
  for (int i = 0; i < layout_.num_params(); ++i)
    out.push_back(NamedTensor::from(layout_.param(i).name, flat_param(flat, i)));
  return out;
}

}  // namespace zt
