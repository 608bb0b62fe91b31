#include "io/hf_export.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "io/unique_keys.h"

namespace zt {

namespace {

// Where an export into a directory holding other files is staged (its name + ".tmp.<pid>.<hex>").
constexpr const char* kInPlaceStaging = ".zerotune-export";

// The ids of a config field: null/absent -> {}, an id -> {id}, a list of ids -> the list.
std::vector<int64_t> field_ids(const Json& j, const char* key, const std::string& origin) {
  std::vector<int64_t> ids;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  if (it->is_number_integer()) return {it->get<int64_t>()};
  if (it->is_array()) {
    for (const Json& v : *it) {
      if (!v.is_number_integer()) break;
      ids.push_back(v.get<int64_t>());
    }
    if (ids.size() == it->size()) return ids;
  }
  fail("{}: {} must be a token id or a list of token ids, got {}", origin, key, it->dump());
}

bool has(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// [id, the others except id].
std::vector<int64_t> put_first(int64_t id, const std::vector<int64_t>& others) {
  std::vector<int64_t> v = {id};
  for (int64_t o : others)
    if (o != id) v.push_back(o);
  return v;
}

Json ids_json(const std::vector<int64_t>& ids) {
  Json a = Json::array();
  for (int64_t id : ids) a.push_back(id);
  return a;
}

// transformers `_align_special_token` for one field; `several`: the EOS, which may be a list.
void align_one(const char* key, std::optional<int64_t> tok_id, std::vector<int64_t>& cfg_ids,
               bool cfg_is_list, Json& gen, const std::string& origin, bool several,
               Json& updated) {
  if (!tok_id) return;
  const int64_t t = *tok_id;
  const std::vector<int64_t> gen_ids = field_ids(gen, key, origin);
  if (has(cfg_ids, t) && has(gen_ids, t)) return;
  updated[key] = t;
  cfg_ids = several && cfg_is_list ? put_first(t, cfg_ids) : std::vector<int64_t>{t};
  if (several)
    gen[key] = ids_json(put_first(t, gen_ids));
  else
    gen[key] = t;
}

// model.safetensors, its index, or a shard "model-<5 digits>-of-<5 digits>.safetensors".
bool is_weight_file(const std::string& n) {
  if (n == "model.safetensors" || n == "model.safetensors.index.json") return true;
  constexpr std::string_view kPre = "model-", kMid = "-of-", kExt = ".safetensors";
  if (n.size() != kPre.size() + 5 + kMid.size() + 5 + kExt.size()) return false;
  const std::string_view v(n);
  const auto digits = [&](size_t at) {
    return std::all_of(v.begin() + static_cast<ptrdiff_t>(at),
                       v.begin() + static_cast<ptrdiff_t>(at + 5),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  return v.starts_with(kPre) && digits(6) && v.substr(11, 4) == kMid && digits(15) &&
         v.ends_with(kExt);
}

// A file of a model export (this one's or an earlier one's): weights, configs, tokenizer files.
bool is_export_file(const std::string& n) {
  if (n == "config.json" || n == "generation_config.json" || n == "trainer_state.json" ||
      is_weight_file(n))
    return true;
  return std::any_of(std::begin(kTokenizerFiles), std::end(kTokenizerFiles),
                     [&](const char* t) { return n == t; });
}

// additional_chat_templates/ as an export writes it: a directory (not a symlink to one, whose
// files are not the export's to remove) of regular *.jinja files.
bool is_export_template_dir(const fs::directory_entry& e) {
  std::error_code ec;
  if (e.path().filename() != kAdditionalChatTemplatesDir || e.is_symlink(ec) || !e.is_directory(ec))
    return false;
  for (const auto& f : fs::directory_iterator(e.path(), ec))
    if (!f.is_regular_file(ec) || f.path().extension() != ".jinja") return false;
  return !ec;
}

// The template files of options.tokenizer_dir, copied as they are (options.chat_templates unset).
void copy_template_files(const fs::path& dir, const HfExportOptions& options) {
  std::error_code ec;
  const fs::path src = options.tokenizer_dir;
  if (fs::exists(src / "chat_template.jinja", ec))
    write_file_atomic(dir / "chat_template.jinja", read_file(src / "chat_template.jinja"));
  if (!fs::is_directory(src / kAdditionalChatTemplatesDir, ec)) return;
  for (const auto& e : fs::directory_iterator(src / kAdditionalChatTemplatesDir)) {
    if (!e.is_regular_file(ec) || e.path().extension() != ".jinja") continue;
    fs::create_directories(dir / kAdditionalChatTemplatesDir);
    write_file_atomic(dir / kAdditionalChatTemplatesDir / e.path().filename(), read_file(e.path()));
  }
}

// options.chat_templates as transformers' save_chat_templates writes them (see HfExportOptions).
void write_chat_templates(const fs::path& dir, const HfExportOptions& options) {
  check_chat_template_names(options, dir.string());
  for (const auto& [name, text] : *options.chat_templates) {
    if (name == "default") {
      write_file_atomic(dir / "chat_template.jinja", text);
      continue;
    }
    fs::create_directories(dir / kAdditionalChatTemplatesDir);
    write_file_atomic(dir / kAdditionalChatTemplatesDir / (name + ".jinja"), text);
  }
}

// The tokenizer files in `dir` (copied from options.tokenizer_dir) changed as the run changed the
// tokenizer and as transformers' save_pretrained writes it: options.chat_templates (see
// HfExportOptions), options.eos_token. A file nothing changes stays a byte copy.
void write_changed_tokenizer(const fs::path& dir, const HfExportOptions& options) {
  if (options.chat_templates)
    write_chat_templates(dir, options);
  else
    copy_template_files(dir, options);
  const auto edit = [&](const char* name, bool create, const auto& change) {
    const fs::path f = dir / name;
    std::error_code ec;
    const bool there = fs::exists(f, ec);
    if (!there && !create) return;
    const std::string origin = (options.tokenizer_dir / name).string();
    Json j = there ? parse_json_unique_keys(read_file(f), origin) : Json::object();
    if (!j.is_object()) fail("{}: expected a JSON object", origin);
    if (!change(j)) return;
    write_file_atomic(f, j.dump(2) + "\n");
  };
  // A plain string in both files, also where special_tokens_map.json held an {"content": …}
  // object: the tokenizer TRL changed (tokenizer.eos_token_id = …) holds the new EOS as a str,
  // and save_pretrained writes it so.
  const auto set_eos = [&](Json& j) {
    if (options.eos_token) j["eos_token"] = *options.eos_token;
    return options.eos_token.has_value();
  };
  edit("tokenizer_config.json", /*create=*/options.eos_token.has_value(), [&](Json& j) {
    const bool eos = set_eos(j);
    return (options.chat_templates && j.erase("chat_template") > 0) || eos;
  });
  edit("special_tokens_map.json", /*create=*/false, set_eos);
}

// The first entry of directory `dir` (by name) that is not a file of a model export, or "".
std::string first_foreign_entry(const fs::path& dir) {
  std::set<std::string> foreign;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (!(e.is_regular_file() && is_export_file(n)) && !is_export_template_dir(e))
      foreign.insert(n);
  }
  return foreign.empty() ? std::string() : *foreign.begin();
}

void remove_earlier(const fs::path& out_dir, const fs::path& old) {
  std::error_code ec;
  if (!fs::remove(old, ec) || ec)
    fail("{}: cannot remove the earlier export's {}: {}", out_dir.string(),
         old.lexically_relative(out_dir).string(), ec.message());
}

void move_into_place(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    fail("{}: cannot move {} into place: {}", to.string(), from.string(), std::strerror(errno));
}

// Moves the files of `staged` (a directory inside `out_dir`) into `out_dir`, each by one rename,
// as save_pretrained writes into a directory that holds other things: the weights first, then the
// weight files of an earlier export that this one does not have are removed (so transformers
// cannot read a stale model.safetensors beside a new index), config.json last. Returns the names.
std::vector<std::string> move_files_into(const fs::path& staged, const fs::path& out_dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(staged))
    names.push_back(e.path().filename().string());
  const auto rank = [](const std::string& n) {
    return is_weight_file(n) ? 0 : n == "config.json" ? 2 : 1;
  };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return std::pair(rank(a), a) < std::pair(rank(b), b);
  });
  const std::set<std::string> written(names.begin(), names.end());
  const fs::path old_templates = out_dir / kAdditionalChatTemplatesDir;
  bool stale_removed = false;
  for (const std::string& n : names) {
    if (rank(n) > 0 && !stale_removed) {
      for (const auto& e : fs::directory_iterator(out_dir)) {
        const std::string old = e.path().filename().string();
        // An earlier export's chat_template.jinja too: transformers prefers it to
        // tokenizer_config.json's template, so one this export lacks would stay the model's.
        if (e.is_regular_file() && (is_weight_file(old) || old == "chat_template.jinja") &&
            !written.contains(old))
          remove_earlier(out_dir, e.path());
      }
      // And its additional_chat_templates/*.jinja, which transformers loads as named templates.
      if (is_export_template_dir(fs::directory_entry(old_templates))) {
        for (const auto& e : fs::directory_iterator(old_templates))
          remove_earlier(out_dir, e.path());
        remove_earlier(out_dir, old_templates);
      }
      stale_removed = true;
    }
    if (n == kAdditionalChatTemplatesDir) {
      fs::create_directories(old_templates);
      for (const auto& e : fs::directory_iterator(staged / n))
        move_into_place(e.path(), old_templates / e.path().filename());
      fsync_dir(old_templates);
      continue;
    }
    move_into_place(staged / n, out_dir / n);
  }
  fsync_dir(out_dir);
  return names;
}

}  // namespace

void check_chat_template_names(const HfExportOptions& options, const std::string& origin) {
  if (!options.chat_templates) return;
  for (const auto& [name, text] : *options.chat_templates)
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      fail(
          "{}: the chat template named '{}' cannot be saved as {}/{}.jinja (transformers' "
          "save_pretrained fails there too); rename it",
          origin, name, kAdditionalChatTemplatesDir, name);
}

Json align_special_token_ids(ModelConfig& cfg, Json& gen, const TokenizerSpecialIds& tok,
                             const std::string& origin) {
  Json updated = Json::object();
  // 1. TRL's SFTTrainer.__init__.
  if (tok.eos && tok.eos_origin != EosOrigin::kTokenizer) {
    const int64_t e = *tok.eos;
    const std::vector<int64_t> gen_eos = field_ids(gen, "eos_token_id", origin);
    if (cfg.eos_token_id != std::vector<int64_t>{e}) updated["eos_token_id"] = e;
    cfg.eos_token_id = {e};
    if (tok.eos_origin == EosOrigin::kClonedTemplate) {
      if (gen_eos != std::vector<int64_t>{e}) updated["eos_token_id"] = e;
      gen["eos_token_id"] = e;
    } else if (!has(gen_eos, e)) {
      updated["eos_token_id"] = e;
      gen["eos_token_id"] = ids_json(put_first(e, gen_eos));
    }
  }
  if (tok.pad) {
    const std::vector<int64_t> gen_pad = field_ids(gen, "pad_token_id", origin);
    if (cfg.pad_token_id != std::vector<int64_t>{*tok.pad} ||
        gen_pad != std::vector<int64_t>{*tok.pad})
      updated["pad_token_id"] = *tok.pad;
    cfg.pad_token_id = {*tok.pad};
    gen["pad_token_id"] = *tok.pad;
  }
  // 2. transformers' align_special_tokens at the start of Trainer.train().
  // A config that declares a list of EOS ids keeps them (as read: a list, or several after step 1).
  const bool eos_list = cfg.eos_token_id.size() > 1 ||
                        (cfg.raw.contains("eos_token_id") && cfg.raw["eos_token_id"].is_array() &&
                         tok.eos_origin == EosOrigin::kTokenizer);
  align_one("eos_token_id", tok.eos, cfg.eos_token_id, eos_list, gen, origin, true, updated);
  align_one("bos_token_id", tok.bos, cfg.bos_token_id, false, gen, origin, false, updated);
  align_one("pad_token_id", tok.pad, cfg.pad_token_id, false, gen, origin, false, updated);
  return updated;
}

GenerationConfigExport export_generation_config(ModelConfig& cfg, const fs::path& input,
                                                const std::optional<TokenizerSpecialIds>& tok) {
  GenerationConfigExport g;
  std::error_code ec;
  if (!input.empty() && fs::exists(input, ec)) {
    g.text = read_file(input);
    g.json = parse_json_unique_keys(g.text, input.string());
    if (!g.json.is_object())
      fail("{}: expected a JSON object (a generation config), got {}", input.string(),
           g.json.type_name());
    g.from_input = true;
  } else {
    g.json = generation_config_json(cfg);
    g.text = g.json.dump(2) + "\n";
  }
  if (!tok) return g;
  const Json before = g.json;
  g.updated = align_special_token_ids(
      cfg, g.json, *tok, g.from_input ? input.string() : "generation_config.json (derived)");
  if (g.json != before) {
    const nlohmann::json sorted = nlohmann::json::parse(g.json.dump());  // std::map: sorted keys
    g.text = sorted.dump(2) + "\n";
  }
  return g;
}

std::vector<StaleStaging> clean_stale_export_dirs(const fs::path& out_dir) {
  std::vector<StaleStaging> done = clean_stale_staging_dirs(out_dir);
  std::error_code ec;
  if (fs::is_directory(out_dir, ec))
    // The in-place staging is never committed over an earlier one: its ".tmp." leftovers only (an
    // ".old." name inside the model folder is never zerotune's).
    for (auto& s : clean_stale_staging_dirs(out_dir / kInPlaceStaging, /*with_old=*/false))
      done.push_back(std::move(s));
  for (const auto& s : done) {
    if (s.restored)
      log::info("restored {} to {}: an interrupted export had moved it aside", s.path.string(),
                out_dir.string());
    else
      log::info("removed {}, left by an interrupted export", s.path.string());
  }
  return done;
}

HfExportResult export_hf_model(const fs::path& out_dir, const ModelConfig& cfg,
                               std::span<const NamedTensor> tensors,
                               const HfExportOptions& options) {
  if (options.dtype != DType::kBF16 && options.dtype != DType::kF32)
    fail("{}: export dtype {} not supported (bf16 or f32)", out_dir.string(),
         dtype_name(options.dtype));
  std::error_code ec;
  if (!options.overwrite && fs::exists(out_dir, ec))
    fail("{}: output directory already exists", out_dir.string());

  // Weights in the file dtype: floats become options.dtype, integers stay as they are.
  std::vector<NamedTensor> stored(tensors.begin(), tensors.end());
  for (NamedTensor& t : stored) {
    const bool is_float =
        t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16;
    if (is_float)
      t.store_as = options.dtype;
    else if (t.store_as && *t.store_as != t.dtype)
      fail("{}: tensor '{}' is {} and cannot be converted to {}", out_dir.string(), t.name,
           dtype_name(t.dtype), dtype_name(*t.store_as));
  }
  const char* dtype_str = options.dtype == DType::kBF16 ? "bfloat16" : "float32";

  // An output directory that holds anything besides a model export (the run's checkpoints, the
  // user's files: output_dir = exp_dir, or ".") gets the model files written into it beside them,
  // as transformers' save_pretrained does; replacing it whole would delete them. Else the export is
  // built beside it and renamed into place (appears complete or not at all).
  // What an export to the same path left when its process was killed mid-way (only those of
  // processes that no longer run).
  clean_stale_export_dirs(out_dir);
  std::string foreign;
  if (fs::is_directory(out_dir, ec)) foreign = first_foreign_entry(out_dir);
  StagingDir stage(foreign.empty() ? out_dir : out_dir / kInPlaceStaging);
  const fs::path& tmp = stage.path();

  ModelConfig out_cfg = cfg;  // its special token ids aligned with the tokenizer's
  const GenerationConfigExport gen =
      export_generation_config(out_cfg, options.generation_config, options.tokenizer_ids);
  write_model_config(tmp / "config.json", out_cfg, dtype_str);
  write_file_atomic(tmp / "generation_config.json", gen.text);

  // transformers 5 adds total_parameters to the index metadata (`save_pretrained`).
  Json extra = Json::object();
  extra["total_parameters"] = cfg.num_parameters();
  const ShardedWriteResult w =
      write_safetensors_sharded(tmp, stored, options.max_shard_size, extra);

  if (!options.tokenizer_dir.empty()) {
    for (const char* name : kTokenizerFiles) {
      const fs::path src = options.tokenizer_dir / name;
      if (fs::exists(src, ec)) write_file_atomic(tmp / name, read_file(src));
    }
    write_changed_tokenizer(tmp, options);
  }
  for (const auto& [name, bytes] : options.extra_files) write_file_atomic(tmp / name, bytes);

  HfExportResult r;
  r.weight_bytes = w.total_size;
  if (!foreign.empty()) {
    r.files = move_files_into(tmp, out_dir);
    std::sort(r.files.begin(), r.files.end());
    log::info(
        "{}: holds other files ('{}', …), so the model files were written into it beside them "
        "(as transformers' save_pretrained does) rather than replacing the directory",
        out_dir.string(), foreign);
    return r;
  }
  for (const auto& e : fs::directory_iterator(tmp)) r.files.push_back(e.path().filename().string());
  std::sort(r.files.begin(), r.files.end());
  stage.commit(options.overwrite);
  return r;
}

}  // namespace zt
