// The named special tokens of tokenizer_config.json (bos/eos/unk/sep/pad/cls/mask_token) made
// tokens of the tokenizer, as transformers' tokenizer loading does: every one that tokenizer.json's
// added_tokens lack is added as a special token (`PreTrainedTokenizerFast.__init__` adds
// `all_special_tokens_extended` missing from the added vocabulary) — with its vocabulary id when
// the BPE vocabulary has it, else the next free id. So an eos_token "<|nope|>" absent from a
// Qwen2.5 tokenizer.json becomes id 151665 and " red red<|nope|>" encodes as [2518, 2518, 151665],
// never as the text's six BPE pieces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace zt::text {

// One special token register_config_special_tokens() added.
struct RegisteredSpecialToken {
  std::string key;      // "eos_token", …
  std::string content;  // "<|nope|>"
  int32_t id = -1;
  bool new_id = false;  // true: not in tokenizer.json's vocabulary (the id is past it)
};

// Adds cfg's named special tokens that `tok` has no added token for, in transformers' order (bos,
// eos, unk, sep, pad, cls, mask; a content given twice once). With `log`, a warning for each new
// id, naming the token's file (special_token_file: tokenizer_config.json or
// special_tokens_map.json), the key, the token and its id. Returns what was added.
std::vector<RegisteredSpecialToken> register_config_special_tokens(Tokenizer& tok,
                                                                   const TokenizerConfig& cfg,
                                                                   bool log = true);

// The post-processor transformers 4.57.1 gives the tokenizer class AutoTokenizer loads
// (TokenizerConfig::tokenizer_class): the fast classes of transformers_tokenizer_class —
// LlamaTokenizer, GemmaTokenizer, CodeLlamaTokenizer, CohereTokenizer, GPTNeoXTokenizer — replace
// tokenizer.json's post-processor in `__init__` (`update_post_processor`) with
// `[bos] $A [eos]` by add_bos_token / add_eos_token (defaults: BOS true, EOS false; GPT-NeoX both
// false). So `add_eos_token: true`, which fine-tuning recipes leave in saved tokenizers, appends an
// EOS to every plain row TRL tokenises, and `add_bos_token: false` drops the BOS. Other classes
// (PreTrainedTokenizerFast — Llama 3 —, Qwen2Tokenizer, …) keep tokenizer.json's. Call after
// register_config_special_tokens. Returns true when it replaced the post-processor. Throws
// zt::Error naming tokenizer_config.json when a flag asks for a BOS / EOS the config sets to null
// (transformers raises "add_bos_token = True but bos_token = None" there too).
bool apply_config_post_processor(Tokenizer& tok, const TokenizerConfig& cfg);

// For error messages: "'<|nope|>', the eos_token of <dir>/tokenizer_config.json" (or of the
// special_tokens_map.json it came from) for a named
// special token, "'Ġred'" for another token, "not a token of the tokenizer" for an id it does not
// have.
std::string describe_token(const Tokenizer& tok, const TokenizerConfig& cfg, int32_t id);

}  // namespace zt::text
