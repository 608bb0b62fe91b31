// The loader's decision when config.json's `tie_word_embeddings` and the checkpoint disagree about
// the LM head, made before the model's parameter layout is planned (the layout follows from it).
// transformers 5 (`PreTrainedModel.tie_weights` while loading) keeps a checkpoint's own
// `lm_head.weight` untied when its values differ from `model.embed_tokens.weight`, with the warning
// "… both are present in the checkpoints with different values, so we will NOT tie them"; zerotune
// does the same, so both tools train and evaluate the same model from the same directory.
#pragma once

#include "io/model_config.h"
#include "io/safetensors.h"

namespace zt {

// What reconcile_tied_embeddings() decided.
enum class TieDecision {
  kAsConfig,           // config and checkpoint agree (or tied and the file has no lm_head.weight)
  kTiedEqualHead,      // tied config, lm_head.weight in the file bitwise equal to the embedding
  kUntiedDistinctHead  // tied config, a different lm_head.weight in the file: loaded untied
};

// Reconciles `cfg.tie_word_embeddings` with the tensors of `weights`:
// - tied config + an lm_head.weight that differs from model.embed_tokens.weight (other bytes,
//   dtype or shape) -> cfg.tie_word_embeddings = false (the file's head is kept, trained and
//   exported; the export's config.json says false), and a warning naming lm_head.weight and
//   tie_word_embeddings;
// - tied config + a bitwise-equal lm_head.weight -> tied (the copy is not loaded), an info line;
// - untied config and no lm_head.weight in the file -> zt::Error naming the weight file,
//   lm_head.weight and config.json's tie_word_embeddings (transformers would start from a random
//   head; zerotune refuses rather than train a different model).
// `log`: print the warning / info line (false for a second call on the same files).
TieDecision reconcile_tied_embeddings(ModelConfig& cfg, const SafetensorsReader& weights,
                                      bool log = true);

}  // namespace zt
