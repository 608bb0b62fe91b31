// tokenizer_config.json special tokens that tokenizer.json lacks are added as transformers' loading
// adds them (case eos-token-not-in-vocab, ../shared/cases: transformers 5.24 AutoTokenizer gives
// eos_token_id 151665 and " red red<|nope|>" -> [2518, 2518, 151665]).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/zt_test_util.h"
#include "io/json.h"
#include "text/chat_template.h"
#include "text/special_tokens.h"
#include "text/tokenizer.h"

namespace zt::text {
namespace {

namespace fs = std::filesystem;
const fs::path kQwen = fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct";

TEST(SpecialTokens, EosMissingFromTheVocabularyGetsTheNextIdAsInTransformers) {
  Tokenizer tok = Tokenizer::load(kQwen / "tokenizer.json");
  ASSERT_EQ(tok.vocab_size(), 151665);
  // Before: the text's BPE pieces (what zerotune trained before the fix).
  EXPECT_EQ(tok.encode(" red red<|nope|>"),
            (std::vector<int32_t>{2518, 2518, 27, 91, 2152, 375, 91, 29}));
  TokenizerConfig cfg = load_tokenizer_config(kQwen);
  cfg.eos_token = "<|nope|>";
  ::testing::internal::CaptureStderr();
  const std::vector<RegisteredSpecialToken> added = register_config_special_tokens(tok, cfg);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].key, "eos_token");
  EXPECT_EQ(added[0].id, 151665);
  EXPECT_TRUE(added[0].new_id);
  EXPECT_EQ(err, "zerotune: warning: " + (kQwen / "tokenizer_config.json").string() +
                     ": eos_token '<|nope|>' is not a token of tokenizer.json; added as a special "
                     "token with id 151665, as transformers does (the model's vocab_size must have "
                     "room for it)\n");
  EXPECT_EQ(tok.vocab_size(), 151666);
  EXPECT_EQ(tok.token_to_id("<|nope|>"), 151665);
  EXPECT_EQ(tok.encode(" red red<|nope|>"), (std::vector<int32_t>{2518, 2518, 151665}));
  const std::vector<int32_t> ids = {2518, 151665, 151645};
  EXPECT_EQ(tok.decode(ids), " red<|nope|><|im_end|>");
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), " red");
  EXPECT_EQ(describe_token(tok, cfg, 151665),
            "'<|nope|>', the eos_token of " + (kQwen / "tokenizer_config.json").string());
  EXPECT_EQ(describe_token(tok, cfg, 2518), "'Ġred'");
  // A second registration changes nothing.
  EXPECT_TRUE(register_config_special_tokens(tok, cfg).empty());
  EXPECT_EQ(tok.vocab_size(), 151666);
}

// A token special_tokens_map.json supplies (tokenizer_config.json leaves it unset) is named with
// that file in the warning and in describe_token, not with tokenizer_config.json.
TEST(SpecialTokens, MessagesNameTheFileTheTokenCameFrom) {
  zt::testing::TempDir dir;
  fs::create_symlink(fs::absolute(kQwen / "tokenizer.json"), dir / "tokenizer.json");
  std::ofstream(dir / "tokenizer_config.json") << R"({"pad_token": "<|endoftext|>"})";
  std::ofstream(dir / "special_tokens_map.json")
      << R"({"eos_token": {"content": "<|nope|>"}, "pad_token": "<|im_end|>"})";
  Tokenizer tok = Tokenizer::load(dir / "tokenizer.json");
  const TokenizerConfig cfg = load_tokenizer_config(dir.path());
  ASSERT_EQ(cfg.eos_token, "<|nope|>");
  ASSERT_EQ(cfg.pad_token, "<|endoftext|>");  // the config's wins
  const std::string map = (dir / "special_tokens_map.json").string(),
                    config = (dir / "tokenizer_config.json").string();
  EXPECT_EQ(special_token_file(cfg, "eos_token").string(), map);
  EXPECT_EQ(special_token_file(cfg, "pad_token").string(), config);
  ::testing::internal::CaptureStderr();
  const std::vector<RegisteredSpecialToken> added = register_config_special_tokens(tok, cfg);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(err, "zerotune: warning: " + map +
                     ": eos_token '<|nope|>' is not a token of tokenizer.json; added as a special "
                     "token with id 151665, as transformers does (the model's vocab_size must have "
                     "room for it)\n");
  EXPECT_EQ(describe_token(tok, cfg, 151665), "'<|nope|>', the eos_token of " + map);
  EXPECT_EQ(describe_token(tok, cfg, 151643), "'<|endoftext|>', the pad_token of " + config);
}

TEST(SpecialTokens, TokensTheTokenizerHasChangeNothing) {
  Tokenizer tok = Tokenizer::load(kQwen / "tokenizer.json");
  const TokenizerConfig cfg = load_tokenizer_config(kQwen);  // eos <|im_end|>, pad <|endoftext|>
  EXPECT_TRUE(register_config_special_tokens(tok, cfg).empty());
  EXPECT_EQ(tok.vocab_size(), 151665);
  EXPECT_EQ(tok.encode(" red<|im_end|>"), (std::vector<int32_t>{2518, 151645}));
}

TEST(SpecialTokens, VocabularyTokenKeepsItsIdAndIsMatchedWhole) {
  Tokenizer tok = Tokenizer::load(kQwen / "tokenizer.json");
  const std::optional<int32_t> red = tok.token_to_id("red");
  ASSERT_TRUE(red.has_value());
  TokenizerConfig cfg;
  cfg.dir = kQwen;
  cfg.bos_token = "red";  // a BPE token, not an added one
  cfg.eos_token = "<|x|>";
  cfg.pad_token = "<|y|>";
  const std::vector<RegisteredSpecialToken> added = register_config_special_tokens(tok, cfg, false);
  ASSERT_EQ(added.size(), 3u);
  EXPECT_EQ(added[0].id, *red);
  EXPECT_FALSE(added[0].new_id);
  EXPECT_EQ(added[1].id, 151665);  // transformers' order: bos, eos, unk, sep, pad, …
  EXPECT_EQ(added[2].id, 151666);
  EXPECT_EQ(tok.vocab_size(), 151667);
  // A special added token is split out of the text before BPE: " red" is " " + "red".
  EXPECT_EQ(tok.encode(" red<|y|>"), (std::vector<int32_t>{220, *red, 151666}));
}

// tokenizer_config.json's add_bos_token / add_eos_token under the class AutoTokenizer loads
// (tokenizer_config.json's tokenizer_class, else config.json's, else its model_type's) decide the
// BOS / EOS that encode(…, add_special_tokens) adds for LlamaTokenizerFast and the other classes
// whose __init__ rebuilds the post-processor, with the class's default tokens where the config
// names none; PreTrainedTokenizerFast and Qwen2TokenizerFast keep tokenizer.json's. zerotune took
// tokenizer.json's always: with `add_eos_token: true` TRL's plain rows end in two EOS, zerotune's
// in one. A directory with tokenizer.json alone gets the class of config.json's model_type with its
// default tokens (Qwen2TokenizerFast: eos / pad / unk <|endoftext|>): zerotune took none, and
// refused plain rows ("no eos_token"), where TRL trains with <|endoftext|>.
// Golden: transformers 4.57.1 AutoTokenizer (tools/make_tokenizer_flag_goldens.py).
TEST(SpecialTokens, AddBosAndAddEosFlagsRebuildTheTemplateAsTransformersClassesDo) {
  const fs::path data = fs::path(ZT_TEST_DATA);
  std::ifstream in(data / "tokenizer" / "config_flags.golden.json");
  const Json golden = Json::parse(in);
  ASSERT_EQ(golden["cases"].size(), 25u);
  int without_config = 0;
  for (const Json& c : golden["cases"]) {
    SCOPED_TRACE(c.dump());
    const std::string name = c["tokenizer"].get<std::string>();
    const fs::path src = name == "qwen2.5-instruct"
                             ? fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" / name
                             : data / "families" / name;
    zt::testing::TempDir d;
    fs::copy_file(src / "tokenizer.json", d / "tokenizer.json");
    // changes null: no tokenizer_config.json at all (config.json's model_type picks the class).
    if (!c["changes"].is_null()) {
      std::ifstream cin(src / "tokenizer_config.json");
      Json cfg_json = Json::parse(cin);
      for (const auto& [key, value] : c["changes"].items()) {
        if (value.is_null())
          cfg_json.erase(key);
        else
          cfg_json[key] = value;
      }
      std::ofstream(d / "tokenizer_config.json") << cfg_json.dump();
    } else {
      ++without_config;
    }
    if (!c["model_config"].is_null()) std::ofstream(d / "config.json") << c["model_config"].dump();
    Tokenizer tok = Tokenizer::load(d / "tokenizer.json");
    const TokenizerConfig cfg = load_tokenizer_config(d.path());
    EXPECT_EQ(cfg.has_config_file, !c["changes"].is_null());
    const auto token = [](const Json& v) {
      return v.is_null() ? std::string() : v.get<std::string>();
    };
    EXPECT_EQ(cfg.bos_token.value_or(""), token(c["bos_token"]));
    EXPECT_EQ(cfg.eos_token.value_or(""), token(c["eos_token"]));
    EXPECT_EQ(cfg.pad_token.value_or(""), token(c["pad_token"]));
    EXPECT_EQ(cfg.unk_token.value_or(""), token(c["unk_token"]));
    register_config_special_tokens(tok, cfg, false);
    const TransformersTokenizerClass* cls =
        transformers_tokenizer_class(c["class"].get<std::string>());
    const bool rebuilds = cls != nullptr && cls->rebuilds_post_processor;
    EXPECT_EQ(apply_config_post_processor(tok, cfg), rebuilds);
    for (const Json& t : c["texts"]) {
      const std::string text = t["text"].get<std::string>();
      EXPECT_EQ(tok.encode(text, true), t["special"].get<std::vector<int32_t>>()) << text;
      EXPECT_EQ(tok.encode(text, false), t["plain"].get<std::vector<int32_t>>()) << text;
    }
  }
  EXPECT_EQ(without_config, 8);
}

// A flag that asks for a token the config sets to null: an error naming the file, as transformers
// raises ("add_eos_token = True but eos_token = None").
TEST(SpecialTokens, AddEosFlagWithANullEosTokenIsAnError) {
  const fs::path src = fs::path(ZT_TEST_DATA) / "families" / "mistral_v3";
  zt::testing::TempDir d;
  fs::copy_file(src / "tokenizer.json", d / "tokenizer.json");
  std::ifstream cin(src / "tokenizer_config.json");
  Json cfg_json = Json::parse(cin);
  cfg_json["eos_token"] = nullptr;
  cfg_json["add_eos_token"] = true;
  std::ofstream(d / "tokenizer_config.json") << cfg_json.dump();
  Tokenizer tok = Tokenizer::load(d / "tokenizer.json");
  const TokenizerConfig cfg = load_tokenizer_config(d.path());
  EXPECT_FALSE(cfg.eos_token.has_value());
  EXPECT_EQ(zt::testing::error_of([&] { apply_config_post_processor(tok, cfg); }),
            (d / "tokenizer_config.json").string() +
                ": add_eos_token is true but eos_token is null; transformers raises here too");
}

}  // namespace
}  // namespace zt::text
