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
      // RMSNorm weight: ones (x·w); zeros for Gemma's x·(1 + w) (Gemma3RMSNorm inits zeros).
      std::fill(host.begin(), host.end(), cfg_.norm_style == RmsNormStyle::kGemma ? 0.0f : 1.0f);
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

namespace {

// Where the text model's tensors of `cfg` sit in `reader`: the HF name of a parameter with
// "model." replaced by `body` and "lm_head." by `head`. A gemma3 multimodal checkpoint keeps them
// under model.language_model.* + lm_head.* (transformers 5) or language_model.model.* +
// language_model.lm_head.* (4.x, renamed by transformers' "llava" conversion mapping); a text-only
// checkpoint (zerotune's export, gemma3_text) under model.*.
struct CheckpointNames {
  std::string body = "model.", head = "lm_head.";
  std::string map(const std::string& name) const {
    if (name.starts_with("model.")) return body + name.substr(6);
    if (name.starts_with("lm_head.")) return head + name.substr(8);
    return name;
  }
};

CheckpointNames checkpoint_names(const ModelConfig& cfg, const SafetensorsReader& reader) {
  CheckpointNames n;
  if (reader.contains("model.embed_tokens.weight")) return n;
  // A base model's save (AutoModel / <Family>Model.save_pretrained: embed_tokens.weight,
  // layers.*, norm.weight, no head): transformers 4.57 adds the "model." prefix when no key of the
  // checkpoint starts with it (`loading_task_model_from_base_state_dict`), so the same here.
  if (cfg.multimodal_type != "gemma3" && reader.contains("embed_tokens.weight")) {
    bool prefixed = false;
    for (const std::string& name : reader.names()) prefixed = prefixed || name.starts_with("model");
    if (!prefixed) {
      // A head key beside unprefixed body keys is a task model's key in a base model's save:
      // transformers 4.57 raises ("The state dictionary of the model you are trying to load is
      // corrupted"), so the same here.
      if (reader.contains("lm_head.weight"))
        fail(
            "{}: the checkpoint's tensors have no 'model.' prefix (a base model's save) but it "
            "holds 'lm_head.weight'; transformers refuses such a checkpoint as corrupted (save the "
            "whole {} model, or drop the head)",
            reader.source().string(), cfg.model_type);
      n.body = "";
      log::info(
          "{}: the checkpoint's tensors have no 'model.' prefix (a base model's save); read as "
          "the {} body, as transformers does",
          reader.source().string(), cfg.model_type);
      return n;
    }
  }
  if (cfg.multimodal_type != "gemma3") return n;
  if (reader.contains("model.language_model.embed_tokens.weight")) {
    n.body = "model.language_model.";
  } else if (reader.contains("language_model.model.embed_tokens.weight")) {
    n.body = "language_model.model.";
    n.head = "language_model.lm_head.";
  } else {
    fail(
        "{}: a gemma3 checkpoint ({}) needs its text embedding as "
        "'model.language_model.embed_tokens.weight' (transformers 5), "
        "'language_model.model.embed_tokens.weight' (4.x) or 'model.embed_tokens.weight'; none "
        "is there",
        reader.source().string(), cfg.source);
  }
  return n;
}

// Tensors of a multimodal checkpoint that belong to the vision tower or the projector.
bool is_vision_tensor(std::string_view name) {
  for (std::string_view p : {"model.vision_tower.", "model.multi_modal_projector.", "vision_tower.",
                             "multi_modal_projector."})
    if (name.starts_with(p)) return true;
  return false;
}

}  // namespace

void CausalLM::load_weights(const SafetensorsReader& reader, const Tensor& flat) {
  check_flat(flat, "load_weights", false);
  const CheckpointNames names = checkpoint_names(cfg_, reader);
  std::vector<std::byte> staging;
  std::set<std::string> used;
  const std::string head = names.map("lm_head.weight");
  for (int i = 0; i < layout_.num_params(); ++i) {
    const ParamSpec& s = layout_.param(i);
    std::string file_name = names.map(s.name);
    // A tied checkpoint that keeps the shared tensor under the head's name only (safetensors'
    // save_model keeps the first name in sorted order): transformers fills the embedding from it.
    if (i == layout_.embed() && layout_.tied() && !reader.contains(file_name) &&
        reader.contains(head)) {
      log::info(
          "{}: no tensor '{}'; the embedding is read from '{}' (tied: tie_word_embeddings "
          "true), as transformers does",
          reader.source().string(), file_name, head);
      file_name = head;
    }
    const Tensor dst = flat_param(flat, i);
    if (dst.device == Device::kCPU) {
      reader.load(file_name, dst);
    } else {
      staging.resize(dst.nbytes());
      reader.load(file_name, dst.dtype, s.shape, staging.data());
      ops_.copy_from_host(dst, staging.data(), stream_);
      ops_.synchronize(stream_);
    }
    used.insert(file_name);
  }
  // The checkpoint's other tensors: known non-parameters are ignored with an info line; anything
  // else means the checkpoint is not of this architecture (e.g. q_norm weights in a qwen2
  // checkpoint), an error naming the file and the tensor.
  int64_t inv_freq = 0, vision = 0;
  std::string first_inv_freq;
  for (const std::string& n : reader.names()) {
    if (used.contains(n)) continue;
    if (n.ends_with(".rotary_emb.inv_freq")) {
      if (inv_freq++ == 0) first_inv_freq = n;
    } else if (cfg_.multimodal_type == "gemma3" && is_vision_tensor(n)) {
      ++vision;
    } else if (n == head && layout_.tied()) {
      log::info(
          "{}: tensor '{}' is not a parameter of this {} model (tied to the embedding); ignored",
          reader.source().string(), n, cfg_.model_type);
    } else {
      fail(
          "{}: tensor '{}' is not a parameter of this {} model ({}); the checkpoint does not "
          "match config.json's architecture",
          reader.source().string(), n, cfg_.model_type,
          cfg_.source.empty() ? "config" : cfg_.source);
    }
  }
  if (inv_freq > 0)
    log::info("{}: {} rotary inv_freq buffer(s) ('{}', …) are not parameters; ignored (recomputed)",
              reader.source().string(), inv_freq, first_inv_freq);
  if (vision > 0)
    log::info(
        "{}: {} vision tower / projector tensors of the gemma3 checkpoint ignored (the text "
        "model is trained)",
        reader.source().string(), vision);
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
