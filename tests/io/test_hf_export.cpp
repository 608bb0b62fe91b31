// HF model directory export, compared byte for byte with transformers' `save_pretrained` output of
// the same weights (tests/data/io/tiny_qwen2_{f32,bf16}, tools/make_io_goldens.py).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/hf_export.h"
#include "text/chat_template.h"

namespace {

using zt::DType;
using zt::NamedTensor;
using zt::testing::expect_error;
using zt::testing::list_dir;
using zt::testing::TempDir;
namespace fs = std::filesystem;

const fs::path kData = fs::path(ZT_TEST_DATA) / "io";
const fs::path kTokenizer = fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct";

// The tiny model's fp32 weights in state_dict order (what the trainer hands to export).
struct Weights {
  std::vector<std::vector<float>> bufs;
  std::vector<NamedTensor> tensors;
};

Weights tiny_weights() {
  const zt::Json g = zt::Json::parse(zt::read_file(kData / "tiny_qwen2.json"));
  Weights w;
  w.bufs.reserve(g["state_dict_order"].size());
  for (const auto& n : g["state_dict_order"]) {
    const std::string name = n.get<std::string>();
    const auto& d = g["tensors"][name];
    std::vector<float> v(d["bits"].size());
    for (size_t i = 0; i < v.size(); ++i) {
      const uint32_t u = d["bits"][i].get<uint32_t>();
      std::memcpy(&v[i], &u, 4);
    }
    w.bufs.push_back(std::move(v));
    NamedTensor t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = d["shape"].get<std::vector<int64_t>>();
    t.data = w.bufs.back().data();
    w.tensors.push_back(std::move(t));
  }
  return w;
}

void expect_same_file(const fs::path& a, const fs::path& b) {
  EXPECT_TRUE(zt::read_file(a) == zt::read_file(b)) << a << " differs from " << b;
}

TEST(HfExport, Bf16ExportEqualsSavePretrained) {
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  zt::HfExportOptions opt;
  opt.dtype = DType::kBF16;
  opt.max_shard_size = 6000;
  opt.tokenizer_dir = kTokenizer;
  opt.generation_config = kData / "tiny_qwen2_bf16" / "generation_config.json";
  const auto res = zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(res.weight_bytes, 10016u);  // 5008 parameters in bf16
  const std::vector<std::string> want = {"config.json",
                                         "generation_config.json",
                                         "model-00001-of-00002.safetensors",
                                         "model-00002-of-00002.safetensors",
                                         "model.safetensors.index.json",
                                         "tokenizer.json",
                                         "tokenizer_config.json"};
  EXPECT_EQ(res.files, want);
  EXPECT_EQ(list_dir(d / "out"), want);
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"out"});  // no temp directory left
  for (const auto& f : list_dir(kData / "tiny_qwen2_bf16"))
    expect_same_file(d / "out" / f, kData / "tiny_qwen2_bf16" / f);
  expect_same_file(d / "out" / "tokenizer.json", kTokenizer / "tokenizer.json");
  expect_same_file(d / "out" / "tokenizer_config.json", kTokenizer / "tokenizer_config.json");
}

// The tokenizer as the run changed it, as TRL saves it (processing_class.save_pretrained): the
// template trained with as chat_template.jinja, tokenizer_config.json's own template removed, and
// the EOS the run set in tokenizer_config.json and special_tokens_map.json (a plain string, as
// transformers writes a token set by id). They were copied unchanged: a served model got a template
// it was not trained with.
TEST(HfExport, TheRunsTemplateAndEosAreInTheExportedTokenizer) {
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  std::filesystem::create_directories(d / "tok");
  zt::write_file_atomic(d / "tok" / "tokenizer.json", zt::read_file(kTokenizer / "tokenizer.json"));
  zt::write_file_atomic(d / "tok" / "tokenizer_config.json",
                        R"({"eos_token": "<|im_end|>", "chat_template": "{{ old }}",)"
                        R"( "model_max_length": 32768})");
  zt::write_file_atomic(d / "tok" / "special_tokens_map.json",
                        R"({"eos_token": {"content": "<|im_end|>", "lstrip": false}})");
  zt::HfExportOptions opt;
  opt.tokenizer_dir = d / "tok";
  opt.chat_templates = {{{"default", "{{ new }}"}}};
  opt.eos_token = "<|endoftext|>";
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(zt::read_file(d / "out" / "chat_template.jinja"), "{{ new }}");
  EXPECT_EQ(zt::Json::parse(zt::read_file(d / "out" / "tokenizer_config.json")),
            zt::Json::parse(R"({"eos_token": "<|endoftext|>", "model_max_length": 32768})"));
  EXPECT_EQ(zt::Json::parse(zt::read_file(d / "out" / "special_tokens_map.json")),
            zt::Json::parse(R"({"eos_token": "<|endoftext|>"})"));
  expect_same_file(d / "out" / "tokenizer.json", kTokenizer / "tokenizer.json");
  // Nothing changed by the run: the files as they are.
  zt::HfExportOptions same;
  same.tokenizer_dir = d / "tok";
  zt::export_hf_model(d / "out2", cfg, w.tensors, same);
  expect_same_file(d / "out2" / "tokenizer_config.json", d / "tok" / "tokenizer_config.json");
  EXPECT_FALSE(fs::exists(d / "out2" / "chat_template.jinja"));
  // A SentencePiece tokenizer.model goes with them, as transformers' save_pretrained writes it.
  zt::write_file_atomic(d / "tok" / "tokenizer.model", std::string("\x0a\x05sp\x00model", 10));
  zt::export_hf_model(d / "out3", cfg, w.tensors, same);
  expect_same_file(d / "out3" / "tokenizer.model", d / "tok" / "tokenizer.model");
}

// The template files of a tokenizer directory paths relative to it, sorted.
std::vector<std::string> template_files(const fs::path& dir) {
  std::vector<std::string> out;
  if (fs::exists(dir / "chat_template.jinja")) out.push_back("chat_template.jinja");
  if (fs::is_directory(dir / zt::kAdditionalChatTemplatesDir))
    for (const std::string& f : list_dir(dir / zt::kAdditionalChatTemplatesDir))
      out.push_back(std::string(zt::kAdditionalChatTemplatesDir) + "/" + f);
  std::sort(out.begin(), out.end());
  return out;
}

// Each layout of chat templates in a tokenizer directory — one in tokenizer_config.json,
// chat_template.jinja, a list of named ones in tokenizer_config.json, chat_template.jinja +
// additional_chat_templates/tool_use.jinja, their mixtures, no default — is read as transformers
// reads it (the template get_chat_template picks with and without tools, or its error) and
// exported as transformers' tokenizer save_pretrained writes it: the same template files with the
// same contents, and no "chat_template" left in tokenizer_config.json. additional_chat_templates/
// was dropped (tool rows then rendered with the default template after a reload), and a
// tokenizer_config.json template stayed there rather than in chat_template.jinja.
// Golden: transformers 4.57.1 AutoTokenizer + save_pretrained
// (tools/make_template_export_goldens.py).
TEST(HfExport, ChatTemplateLayoutsAreSavedAsTransformersSavesThem) {
  const fs::path tok = fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" / "qwen2.5-instruct";
  const zt::Json golden = zt::Json::parse(
      zt::read_file(fs::path(ZT_TEST_DATA) / "chat_template" / "export_layouts.golden.json"));
  ASSERT_EQ(golden["layouts"].size(), 11u);
  zt::Json base = zt::Json::parse(zt::read_file(tok / "tokenizer_config.json"));
  base.erase("chat_template");
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  int with_additional = 0;
  for (const zt::Json& l : golden["layouts"]) {
    const std::string name = l["name"].get<std::string>();
    SCOPED_TRACE(name);
    TempDir d;
    const fs::path in = d / "in";
    fs::create_directories(in);
    fs::copy_file(tok / "tokenizer.json", in / "tokenizer.json");
    zt::Json tc = base;
    if (l.contains("config_chat_template")) tc["chat_template"] = l["config_chat_template"];
    zt::write_file_atomic(in / "tokenizer_config.json", tc.dump(2));
    for (const auto& [rel, text] : l["files"].items()) {
      fs::create_directories((in / rel).parent_path());
      zt::write_file_atomic(in / rel, text.get<std::string>());
    }
    // Read as transformers reads it: the template picked without and with tools.
    const zt::text::TokenizerConfig loaded = zt::text::load_tokenizer_config(in);
    for (const auto& [key, tools] : {std::pair{"picked", false}, {"picked_with_tools", true}}) {
      const zt::Json& want = l[key];
      if (want.contains("template")) {
        EXPECT_EQ(zt::text::select_chat_template(loaded, tools),
                  want["template"].get<std::string>())
            << key;
      } else {
        const std::string err =
            zt::testing::error_of([&] { zt::text::select_chat_template(loaded, tools); });
        const std::string hf = want["error"].get<std::string>();
        // transformers' two errors: no default among named templates (the names listed), none.
        if (hf.starts_with("This model has multiple chat templates with no default specified!")) {
          const std::string names = hf.substr(hf.find("names are [") + 11);
          EXPECT_NE(err.find("has multiple chat templates with no default specified"),
                    std::string::npos)
              << err;
          EXPECT_NE(err.find("available template names are [" + names.substr(0, names.size() - 1)),
                    std::string::npos)
              << err;
        } else {
          EXPECT_NE(err.find("the tokenizer has no chat template"), std::string::npos) << err;
        }
      }
    }
    // Saved as save_pretrained saves it.
    zt::HfExportOptions opt;
    opt.tokenizer_dir = in;
    opt.chat_templates = zt::text::chat_templates_by_name(loaded);
    zt::export_hf_model(d / "out", cfg, w.tensors, opt);
    std::vector<std::string> want_files;
    for (const zt::Json& f : l["saved_files"]) {
      const std::string rel = f.get<std::string>();
      if (rel == "chat_template.jinja" || rel.starts_with("additional_chat_templates/"))
        want_files.push_back(rel);
    }
    EXPECT_EQ(template_files(d / "out"), want_files);
    for (const auto& [rel, text] : l["saved_templates"].items())
      EXPECT_EQ(zt::read_file(d / "out" / rel), text.get<std::string>()) << rel;
    const zt::Json out_tc = zt::Json::parse(zt::read_file(d / "out" / "tokenizer_config.json"));
    EXPECT_EQ(out_tc.contains("chat_template"), l.contains("saved_config_chat_template"));
    if (l.contains("saved_config_chat_template"))
      EXPECT_EQ(out_tc["chat_template"], l["saved_config_chat_template"]);
    // The rest of tokenizer_config.json as it was.
    zt::Json rest = out_tc;
    rest.erase("chat_template");
    EXPECT_EQ(rest, base);
    // And the export reads back as the input did.
    const zt::text::TokenizerConfig again = zt::text::load_tokenizer_config(d / "out");
    EXPECT_EQ(zt::text::chat_templates_by_name(again), opt.chat_templates);
    with_additional += fs::is_directory(d / "out" / "additional_chat_templates");
  }
  EXPECT_EQ(with_additional, 6);
}

// An export into a directory that holds other files (output_dir = exp_dir) replaces an earlier
// export's additional_chat_templates/ whole: a template this export lacks would stay the model's.
// A directory whose only extra entry is that folder is an earlier export (replaced whole).
TEST(HfExport, AdditionalTemplatesOfAnEarlierExportAreReplaced) {
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  fs::create_directories(d / "tok");
  zt::write_file_atomic(d / "tok" / "tokenizer.json", zt::read_file(kTokenizer / "tokenizer.json"));
  zt::HfExportOptions opt;
  opt.tokenizer_dir = d / "tok";
  opt.chat_templates = {{{"default", "D"}, {"tool_use", "T"}, {"rag", "R"}}};
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(template_files(d / "out"),
            (std::vector<std::string>{"additional_chat_templates/rag.jinja",
                                      "additional_chat_templates/tool_use.jinja",
                                      "chat_template.jinja"}));
  opt.chat_templates = {{{"default", "D2"}, {"tool_use", "T2"}}};
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(list_dir(d.path()), (std::vector<std::string>{"out", "tok"}));  // replaced whole
  EXPECT_EQ(template_files(d / "out"),
            (std::vector<std::string>{"additional_chat_templates/tool_use.jinja",
                                      "chat_template.jinja"}));
  // Beside the user's files: written into the directory, the stale ones removed.
  zt::write_file_atomic(d / "out" / "notes.txt", "mine");
  opt.chat_templates = {{{"default", "D3"}, {"rag", "R3"}}};
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(zt::read_file(d / "out" / "notes.txt"), "mine");
  EXPECT_EQ(
      template_files(d / "out"),
      (std::vector<std::string>{"additional_chat_templates/rag.jinja", "chat_template.jinja"}));
  EXPECT_EQ(zt::read_file(d / "out" / "additional_chat_templates" / "rag.jinja"), "R3");
  EXPECT_EQ(zt::read_file(d / "out" / "chat_template.jinja"), "D3");
  // A single template: no additional_chat_templates/ left.
  opt.chat_templates = {{{"default", "D4"}}};
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(template_files(d / "out"), std::vector<std::string>{"chat_template.jinja"});
  EXPECT_FALSE(fs::exists(d / "out" / "additional_chat_templates"));
  // A symlink of that name is the user's, not an earlier export's: the files it points to stay.
  fs::create_directories(d / "mine");
  zt::write_file_atomic(d / "mine" / "keep.jinja", "K");
  fs::create_directory_symlink(d / "mine", d / "out" / "additional_chat_templates");
  opt.chat_templates = {{{"default", "D5"}}};
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  EXPECT_EQ(zt::read_file(d / "mine" / "keep.jinja"), "K");
  EXPECT_TRUE(fs::is_symlink(d / "out" / "additional_chat_templates"));
  EXPECT_EQ(zt::read_file(d / "out" / "chat_template.jinja"), "D5");
  // A name that cannot be a file name: refused, naming it.
  opt.chat_templates = {{{"default", "D"}, {"a/b", "X"}}};
  EXPECT_EQ(zt::testing::error_of([&] { zt::check_chat_template_names(opt, "tc.json"); }),
            "tc.json: the chat template named 'a/b' cannot be saved as "
            "additional_chat_templates/a/b.jinja (transformers' save_pretrained fails there too); "
            "rename it");
}

TEST(HfExport, F32ExportEqualsSavePretrainedAndReplacesOldOutput) {
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  fs::create_directories(d / "out");
  zt::write_file_atomic(d / "out" / "model.safetensors", "old");  // an earlier unsharded export
  zt::HfExportOptions opt;
  opt.dtype = DType::kF32;
  opt.max_shard_size = 6000;
  zt::export_hf_model(d / "out", cfg, w.tensors, opt);
  for (const auto& f : list_dir(kData / "tiny_qwen2_f32"))
    if (f != "generation_config.json")
      expect_same_file(d / "out" / f, kData / "tiny_qwen2_f32" / f);
  EXPECT_FALSE(fs::exists(d / "out" / "model.safetensors"));
  // generation_config.json derived from the model config when none is given.
  EXPECT_EQ(
      zt::Json::parse(zt::read_file(d / "out" / "generation_config.json")).dump(),
      R"({"_from_model_config":true,"bos_token_id":1,"eos_token_id":2,"transformers_version":"5.24.0"})");
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"out"});
  // Unsharded under the default 5 GB limit: one model.safetensors, readable back.
  zt::export_hf_model(d / "one", cfg, w.tensors, {});
  EXPECT_TRUE(fs::exists(d / "one" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(d / "one" / "model.safetensors.index.json"));
  zt::SafetensorsReader r(d / "one");
  EXPECT_EQ(r.info("model.norm.weight").dtype_str, "BF16");
  EXPECT_EQ(r.load_f32("model.norm.weight")[3], zt::bf16_to_f32(zt::f32_to_bf16(w.bufs.back()[3])));
  EXPECT_EQ(zt::load_model_config(d / "one").dtype, "bfloat16");
}

TEST(HfExport, FailureLeavesNoPartialOutput) {
  Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  w.tensors[5].data = nullptr;  // fails while the shards are being written
  expect_error([&] { zt::export_hf_model(d / "out", cfg, w.tensors, {}); },
               {"tensor 'model.layers.0.self_attn.v_proj.weight' has no data pointer"});
  EXPECT_TRUE(list_dir(d.path()).empty());
  w = tiny_weights();
  fs::create_directories(d / "exists");
  zt::HfExportOptions keep;
  keep.overwrite = false;
  expect_error([&] { zt::export_hf_model(d / "exists", cfg, w.tensors, keep); },
               {"exists: output directory already exists"});
  zt::HfExportOptions f16;
  f16.dtype = DType::kF16;
  expect_error([&] { zt::export_hf_model(d / "x", cfg, w.tensors, f16); },
               {"export dtype f16 not supported (bf16 or f32)"});
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"exists"});
}

TEST(HfExport, DirectoryHoldingOtherFilesGetsTheModelBesideThem) {
  // output_dir = exp_dir (HF's layout: checkpoints and the final model in one directory), or a
  // directory of the user's: the export must not replace it whole (it deleted the checkpoints,
  // metrics.jsonl and the user's files). An earlier export's weight files are replaced.
  Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  const fs::path out = d / "out";
  fs::create_directories(out / "checkpoint-2");
  zt::write_file_atomic(out / "checkpoint-2" / "trainer_state.json", "{}");
  zt::write_file_atomic(out / "notes.txt", "mine");
  zt::write_file_atomic(out / "model.safetensors", "old single file");
  zt::write_file_atomic(out / "model-00003-of-00003.safetensors", "old shard");
  zt::HfExportOptions opt;
  opt.dtype = DType::kF32;
  opt.max_shard_size = 6000;
  const auto res = zt::export_hf_model(out, cfg, w.tensors, opt);
  const std::vector<std::string> written = list_dir(kData / "tiny_qwen2_f32");  // 4 shards
  ASSERT_EQ(written.size(), 7u);
  EXPECT_EQ(res.files, written);
  std::vector<std::string> want = written;
  want.insert(want.begin(), "checkpoint-2");
  want.push_back("notes.txt");
  EXPECT_EQ(list_dir(out), want);  // no staging directory left, no stale weights
  EXPECT_EQ(zt::read_file(out / "notes.txt"), "mine");
  EXPECT_EQ(zt::read_file(out / "checkpoint-2" / "trainer_state.json"), "{}");
  for (const auto& f : list_dir(kData / "tiny_qwen2_f32"))
    if (f != "generation_config.json") expect_same_file(out / f, kData / "tiny_qwen2_f32" / f);
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"out"});
  // A failure while writing leaves the directory as it was.
  w.tensors[5].data = nullptr;
  expect_error([&] { zt::export_hf_model(out, cfg, w.tensors, opt); },
               {"tensor 'model.layers.0.self_attn.v_proj.weight' has no data pointer"});
  EXPECT_EQ(list_dir(out), want);
  // Unsharded now: the earlier export's index and shards go, and so does an earlier export's
  // chat_template.jinja (transformers would prefer it to this export's tokenizer_config.json
  // template); the user's files stay.
  zt::write_file_atomic(out / "chat_template.jinja", "{{ stale }}");
  w = tiny_weights();
  zt::export_hf_model(out, cfg, w.tensors, {});
  EXPECT_EQ(list_dir(out),
            (std::vector<std::string>{"checkpoint-2", "config.json", "generation_config.json",
                                      "model.safetensors", "notes.txt"}));
  EXPECT_EQ(zt::SafetensorsReader(out).names().size(), w.tensors.size());
}

// An export whose process was killed left its staging directory (beside the output, or inside it
// when the output holds other files); the next export to that path removes it, naming it, and
// leaves a live process's alone.
TEST(HfExport, StaleStagingOfAKilledExportIsRemovedByTheNext) {
  const Weights w = tiny_weights();
  const zt::ModelConfig cfg = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid no process runs under
  const std::string gone = std::to_string(child), live = std::to_string(::getppid());
  const fs::path out = d / "out";
  const fs::path beside = d / ("out.tmp." + gone + ".00000000000000aa");
  const fs::path inside = out / (".zerotune-export.tmp." + gone + ".00000000000000bb");
  const fs::path running = d / ("out.tmp." + live + ".00000000000000cc");
  for (const fs::path& p : {beside, inside, running}) {
    fs::create_directories(p);
    zt::write_file_atomic(p / "model.safetensors", "partial");
  }
  zt::write_file_atomic(out / "notes.txt", "mine");
  // An ".old." name inside the model folder is never zerotune's (the in-place staging is never
  // committed over an earlier one): the user's, left alone.
  const fs::path users = out / (".zerotune-export.old." + gone + ".00000000000000dd");
  fs::create_directories(users);
  zt::write_file_atomic(users / "notes", "theirs");
  ::testing::internal::CaptureStderr();
  zt::export_hf_model(out, cfg, w.tensors, {});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(list_dir(d.path()), (std::vector<std::string>{"out", running.filename().string()}));
  EXPECT_EQ(list_dir(out),
            (std::vector<std::string>{users.filename().string(), "config.json",
                                      "generation_config.json", "model.safetensors", "notes.txt"}));
  EXPECT_EQ(zt::read_file(users / "notes"), "theirs");
  EXPECT_NE(
      log.find("zerotune: info: removed " + beside.string() + ", left by an interrupted export\n"),
      std::string::npos)
      << log;
  EXPECT_NE(
      log.find("zerotune: info: removed " + inside.string() + ", left by an interrupted export\n"),
      std::string::npos)
      << log;
  EXPECT_EQ(log.find(running.string()), std::string::npos) << log;
}

}  // namespace
