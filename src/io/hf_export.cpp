#include "io/hf_export.h"

#include <algorithm>

#include "core/error.h"
#include "io/unique_keys.h"

namespace zt {

GenerationConfigExport export_generation_config(const ModelConfig& cfg, const fs::path& input,
                                                std::optional<int64_t> trained_eos) {
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
  if (!trained_eos) return g;
  const std::string origin = g.from_input ? input.string() : "generation_config.json";
  std::vector<int64_t> eos;
  if (auto it = g.json.find("eos_token_id"); it != g.json.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      eos.push_back(it->get<int64_t>());
    } else if (it->is_array()) {
      for (const Json& v : *it) {
        if (!v.is_number_integer())
          fail("{}: eos_token_id must be a token id or a list of token ids, got {}", origin,
               it->dump());
        eos.push_back(v.get<int64_t>());
      }
    } else {
      fail("{}: eos_token_id must be a token id or a list of token ids, got {}", origin,
           it->dump());
    }
  }
  if (std::find(eos.begin(), eos.end(), *trained_eos) != eos.end()) return g;
  eos.insert(eos.begin(), *trained_eos);
  Json ids = Json::array();
  for (int64_t id : eos) ids.push_back(id);
  g.json["eos_token_id"] = ids;
  const nlohmann::json sorted = nlohmann::json::parse(g.json.dump());  // std::map: sorted keys
  g.text = sorted.dump(2) + "\n";
  g.eos_added = true;
  return g;
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

  StagingDir stage(out_dir);
  const fs::path& tmp = stage.path();

  write_model_config(tmp / "config.json", cfg, dtype_str);

  write_file_atomic(
      tmp / "generation_config.json",
      export_generation_config(cfg, options.generation_config, options.trained_eos_token_id).text);

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
  }

  HfExportResult r;
  r.weight_bytes = w.total_size;
  for (const auto& e : fs::directory_iterator(tmp)) r.files.push_back(e.path().filename().string());
  std::sort(r.files.begin(), r.files.end());
  stage.commit(options.overwrite);
  return r;
}

}  // namespace zt
