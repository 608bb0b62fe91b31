#include "io/tied_embeddings.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace zt {

TieDecision reconcile_tied_embeddings(ModelConfig& cfg, const SafetensorsReader& weights,
                                      bool log) {
  constexpr const char* kEmbed = "model.embed_tokens.weight";
  constexpr const char* kHead = "lm_head.weight";
  const std::string config_file = cfg.source.empty() ? "config.json" : cfg.source;
  const std::string file = weights.source().string();
  if (!cfg.tie_word_embeddings) {
    if (!weights.contains(kHead) && weights.contains(kEmbed))
      fail(
          "{}: tensor '{}' not found, but {} has tie_word_embeddings false (an LM head of its "
          "own); set tie_word_embeddings to true if the head is the input embedding, or use the "
          "checkpoint that has the head (transformers would start from a random head)",
          file, kHead, config_file);
    return TieDecision::kAsConfig;
  }
  if (!weights.contains(kHead) || !weights.contains(kEmbed)) return TieDecision::kAsConfig;
  const SafetensorsTensorInfo& e = weights.info(kEmbed);
  const SafetensorsTensorInfo& h = weights.info(kHead);
  const std::span<const std::byte> eb = weights.raw(kEmbed), hb = weights.raw(kHead);
  const bool equal = e.dtype_str == h.dtype_str && e.shape == h.shape && eb.size() == hb.size() &&
                     std::memcmp(eb.data(), hb.data(), eb.size()) == 0;
  if (equal) {
    if (log)
      log::info("{}: tensor '{}' equals '{}' bitwise; tied, as {} says (tie_word_embeddings true)",
                file, kHead, kEmbed, config_file);
    return TieDecision::kTiedEqualHead;
  }
  cfg.tie_word_embeddings = false;
  if (log)
    log::warn(
        "{}: {} has tie_word_embeddings true, but the checkpoint holds an '{}' different from "
        "'{}'; loading them untied (the file's head is kept, trained and exported with "
        "tie_word_embeddings false), as transformers 5 does — transformers 4.57 ties them and "
        "drops the file's head, training another model. Set tie_word_embeddings to false to "
        "silence this warning",
        file, config_file, kHead, kEmbed);
  return TieDecision::kUntiedDistinctHead;
}

}  // namespace zt
