#include "io/hf_export.h"

#include <algorithm>

#include "core/error.h"

namespace zt {

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

  // generation_config.json: a copy of the given one, else derived from the model config.
  if (!options.generation_config.empty() && fs::exists(options.generation_config, ec))
    write_file_atomic(tmp / "generation_config.json", read_file(options.generation_config));
  else
    write_file_atomic(tmp / "generation_config.json", generation_config_json(cfg).dump(2) + "\n");

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
