// What a run exports with its weights into checkpoint-<step>/ and the final output_dir
// (io/hf_export.h): the weights' dtype, the tokenizer files, and the input model directory's
// generation_config.json — transformers' `save_pretrained` writes the generation config it loaded —
// with the EOS the training ended completions with among its eos_token_id, as transformers'
// `Trainer._align_special_tokens` puts the tokenizer's EOS there before training.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "io/hf_export.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "train/train_args.h"

namespace zt::train {

// The special tokens of the tokenizer a run trains with, as TRL 1.16's SFTTrainer leaves it: eos =
// trainer.eos_token (kEosTokenArg), else the EOS of the tokenizer a chat_template_path clones
// (kClonedTemplate), else tokenizer_config.json's eos_token — the EOS SFT formatting appends and
// trains (data/sft_tokenize.h); bos = tokenizer_config.json's bos_token; pad = its pad_token, else
// the EOS (TRL's default). Each is unset when it is not set or not a token of `tok`.
TokenizerSpecialIds run_tokenizer_ids(const TrainArgs& a, const text::Tokenizer& tok,
                                      const text::TokenizerConfig& tc);

// HfExportOptions of a run: dtype a.export_dtype (bf16 under DeepSpeed with bf16 or for
// model_init_kwargs dtype bfloat16, else f32: train_args.h); tokenizer files from `tok_dir`;
// generation_config = <model_dir>/generation_config.json (derived from config.json when absent);
// tokenizer_ids = run_tokenizer_ids(), so config.json's and generation_config.json's special token
// ids are exported as TRL + transformers' Trainer leave them (io/hf_export.h). With `log`, one info
// line says which generation config is exported and what the alignment changed. Throws zt::Error
// (naming the file) for an input generation_config.json the export cannot read.
HfExportOptions run_export_options(const TrainArgs& a, const text::Tokenizer& tok,
                                   const text::TokenizerConfig& tc,
                                   const std::filesystem::path& tok_dir, const ModelConfig& mcfg,
                                   bool log);

}  // namespace zt::train
