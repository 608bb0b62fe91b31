// accelerate config YAML -> AccelerateConfig (see accelerate_config.h).
#include "dist/accelerate_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/log.h"

namespace zt::dist {

namespace {

const std::set<std::string> kTopKeys = {"compute_environment",
                                        "debug",
                                        "distributed_type",
                                        "downcast_bf16",
                                        "enable_cpu_affinity",
                                        "gpu_ids",
                                        "machine_rank",
                                        "main_process_ip",
                                        "main_process_port",
                                        "main_training_function",
                                        "mixed_precision",
                                        "num_machines",
                                        "num_processes",
                                        "rdzv_backend",
                                        "same_network",
                                        "tpu_env",
                                        "tpu_use_cluster",
                                        "tpu_use_sudo",
                                        "tpu_name",
                                        "tpu_zone",
                                        "use_cpu",
                                        "deepspeed_config",
                                        "fsdp_config",
                                        "dynamo_config",
                                        "megatron_lm_config",
                                        "ipex_config",
                                        "mpirun_config",
                                        "parallelism_config",
                                        "fp8_config",
                                        "commands",
                                        "command_file",
                                        "dynamo_backend"};
const std::set<std::string> kDeepSpeedKeys = {"zero_stage",
                                              "offload_optimizer_device",
                                              "offload_param_device",
                                              "gradient_accumulation_steps",
                                              "gradient_clipping",
                                              "zero3_init_flag",
                                              "zero3_save_16bit_model",
                                              "deepspeed_config_file",
                                              "deepspeed_multinode_launcher",
                                              "deepspeed_hostfile",
                                              "deepspeed_exclusion_filter",
                                              "deepspeed_inclusion_filter",
                                              "offload_optimizer_nvme_path",
                                              "offload_param_nvme_path",
                                              "deepspeed_moe_layer_cls_names"};
const std::set<std::string> kFsdpKeys = {"fsdp_sharding_strategy",
                                         "fsdp_offload_params",
                                         "fsdp_version",
                                         "fsdp_reshard_after_forward",
                                         "fsdp_auto_wrap_policy",
                                         "fsdp_backward_prefetch",
                                         "fsdp_backward_prefetch_policy",
                                         "fsdp_cpu_ram_efficient_loading",
                                         "fsdp_forward_prefetch",
                                         "fsdp_state_dict_type",
                                         "fsdp_sync_module_states",
                                         "fsdp_transformer_layer_cls_to_wrap",
                                         "fsdp_use_orig_params",
                                         "fsdp_activation_checkpointing",
                                         "fsdp_min_num_params"};

// Reading context: names the origin in messages and collects warnings.
struct Reader {
  AccelerateConfig* cfg;
  std::string origin;

  void warn(const std::string& msg) {
    cfg->warnings.push_back(msg);
    log::warn("{}", msg);
  }
  [[noreturn]] void bad(const YAML::Node& n, const std::string& key, const std::string& expected) {
    fail("{}:{}: key '{}' has value '{}' (expected {})", origin, n.Mark().line + 1, key,
         n.IsScalar() ? n.Scalar() : std::string("<not a scalar>"), expected);
  }
  std::string str(const YAML::Node& n, const std::string& key) {
    if (!n.IsScalar()) bad(n, key, "a string");
    return n.Scalar();
  }
  int integer(const YAML::Node& n, const std::string& key, int lo, int hi) {
    int v = 0;
    if (!n.IsScalar() || !YAML::convert<int>::decode(n, v) || v < lo || v > hi)
      bad(n, key, fmt::format("an integer in [{}, {}]", lo, hi));
    return v;
  }
  bool boolean(const YAML::Node& n, const std::string& key) {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) bad(n, key, "true or false");
    return v;
  }
  // True when the node is a number (false for "auto" and other strings, as DeepSpeed allows).
  template <typename T>
  std::optional<T> number_or_auto(const YAML::Node& n, const std::string& key) {
    if (n.IsNull()) return std::nullopt;
    T v{};
    if (n.IsScalar() && YAML::convert<T>::decode(n, v)) return v;
    if (n.IsScalar() && n.Scalar() == "auto") return std::nullopt;
    bad(n, key, "a number or \"auto\"");
  }
  void unknown_keys(const YAML::Node& map, const std::set<std::string>& known,
                    const std::string& prefix) {
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      if (!known.count(k))
        warn(fmt::format("{}:{}: unknown key '{}{}' ignored", origin, kv.first.Mark().line + 1,
                         prefix, k));
    }
  }
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

void read_offload(Reader& rd, const YAML::Node& n, const std::string& key, std::string* out) {
  const std::string v = rd.str(n, key);
  if (v == "none" || v == "cpu") {
    *out = v;
    return;
  }
  if (v == "nvme") rd.bad(n, key, "none or cpu (zerotune does not offload to nvme)");
  rd.bad(n, key, "none or cpu");
}

// deepspeed_config_file: the DeepSpeed JSON (a YAML subset) with zero_optimization etc.
void read_deepspeed_json(Reader& rd, const std::string& file, const std::string& base_dir) {
  std::filesystem::path p(file);
  if (p.is_relative() && !std::filesystem::exists(p)) p = std::filesystem::path(base_dir) / file;
  YAML::Node j;
  try {
    j = YAML::LoadFile(p.string());
  } catch (const YAML::Exception& e) {
    fail("{}: deepspeed_config_file '{}' cannot be read: {}", rd.origin, p.string(), e.what());
  }
  Reader jr{rd.cfg, p.string()};
  if (const YAML::Node z = j["zero_optimization"]) {
    if (const YAML::Node s = z["stage"])
      rd.cfg->zero_stage = jr.integer(s, "zero_optimization.stage", 0, 3);
    if (const YAML::Node o = z["offload_optimizer"]; o && o["device"])
      read_offload(jr, o["device"], "zero_optimization.offload_optimizer.device",
                   &rd.cfg->offload_optimizer_device);
    if (const YAML::Node o = z["offload_param"]; o && o["device"])
      read_offload(jr, o["device"], "zero_optimization.offload_param.device",
                   &rd.cfg->offload_param_device);
  }
  if (const YAML::Node b = j["bf16"]; b && b["enabled"] && b["enabled"].Scalar() != "auto" &&
                                      jr.boolean(b["enabled"], "bf16.enabled"))
    rd.cfg->mixed_precision = "bf16";
  if (const YAML::Node f = j["fp16"]; f && f["enabled"] && f["enabled"].Scalar() != "auto" &&
                                      jr.boolean(f["enabled"], "fp16.enabled"))
    rd.cfg->mixed_precision = "fp16";
  if (const YAML::Node g = j["gradient_accumulation_steps"])
    rd.cfg->gradient_accumulation_steps = jr.number_or_auto<int>(g, "gradient_accumulation_steps");
  if (const YAML::Node g = j["gradient_clipping"])
    rd.cfg->gradient_clipping = jr.number_or_auto<double>(g, "gradient_clipping");
}

void read_deepspeed(Reader& rd, const YAML::Node& ds, const std::string& base_dir) {
  if (!ds.IsMap()) rd.bad(ds, "deepspeed_config", "a mapping");
  rd.unknown_keys(ds, kDeepSpeedKeys, "deepspeed_config.");
  AccelerateConfig& c = *rd.cfg;
  if (const YAML::Node f = ds["deepspeed_config_file"]; f && !f.IsNull())
    read_deepspeed_json(rd, rd.str(f, "deepspeed_config.deepspeed_config_file"), base_dir);
  if (const YAML::Node s = ds["zero_stage"])
    c.zero_stage = rd.integer(s, "deepspeed_config.zero_stage", 0, 3);
  if (const YAML::Node o = ds["offload_optimizer_device"])
    read_offload(rd, o, "deepspeed_config.offload_optimizer_device", &c.offload_optimizer_device);
  if (const YAML::Node o = ds["offload_param_device"])
    read_offload(rd, o, "deepspeed_config.offload_param_device", &c.offload_param_device);
  if (const YAML::Node g = ds["gradient_accumulation_steps"])
    c.gradient_accumulation_steps =
        rd.number_or_auto<int>(g, "deepspeed_config.gradient_accumulation_steps");
  if (const YAML::Node g = ds["gradient_clipping"])
    c.gradient_clipping = rd.number_or_auto<double>(g, "deepspeed_config.gradient_clipping");
}

void read_fsdp(Reader& rd, const YAML::Node& fs) {
  if (!fs.IsMap()) rd.bad(fs, "fsdp_config", "a mapping");
  rd.unknown_keys(fs, kFsdpKeys, "fsdp_config.");
  AccelerateConfig& c = *rd.cfg;
  c.zero_stage = 3;  // accelerate's default strategy is FULL_SHARD
  int version = 1;
  if (const YAML::Node v = fs["fsdp_version"])
    version = rd.integer(v, "fsdp_config.fsdp_version", 1, 2);
  if (version == 2) {
    if (const YAML::Node r = fs["fsdp_reshard_after_forward"])
      c.zero_stage = rd.boolean(r, "fsdp_config.fsdp_reshard_after_forward") ? 3 : 2;
  } else if (const YAML::Node s = fs["fsdp_sharding_strategy"]) {
    const std::string v = upper(rd.str(s, "fsdp_config.fsdp_sharding_strategy"));
    if (v == "FULL_SHARD" || v == "1") {
      c.zero_stage = 3;
    } else if (v == "SHARD_GRAD_OP" || v == "2") {
      c.zero_stage = 2;
    } else if (v == "NO_SHARD" || v == "3") {
      c.zero_stage = 0;
    } else if (v == "HYBRID_SHARD" || v == "4" || v == "_HYBRID_SHARD_ZERO2" || v == "5") {
      c.zero_stage = (v == "HYBRID_SHARD" || v == "4") ? 3 : 2;
      rd.warn(
          fmt::format("{}:{}: fsdp_sharding_strategy {} is run as ZeRO stage {} over all ranks "
                      "(zerotune has no hybrid sharding)",
                      rd.origin, s.Mark().line + 1, v, c.zero_stage));
    } else {
      rd.bad(s, "fsdp_config.fsdp_sharding_strategy",
             "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2");
    }
  }
  if (const YAML::Node o = fs["fsdp_offload_params"];
      o && rd.boolean(o, "fsdp_config.fsdp_offload_params")) {
    c.offload_optimizer_device = "cpu";
    rd.warn(
        fmt::format("{}:{}: fsdp_offload_params: true is run as optimizer offload to the CPU "
                    "(parameters stay on the device)",
                    rd.origin, o.Mark().line + 1));
  }
}

}  // namespace

AccelerateConfig parse_accelerate_config_text(const std::string& yaml, const std::string& origin,
                                              const std::string& base_dir) {
  AccelerateConfig c;
  c.path = origin;
  Reader rd{&c, origin};
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    fail("{}:{}: not valid YAML: {}", origin, e.mark.line + 1, e.msg);
  }
  if (root.IsNull()) return c;
  if (!root.IsMap()) fail("{}: expected a mapping of accelerate settings at the top level", origin);
  rd.unknown_keys(root, kTopKeys, "");

  if (const YAML::Node n = root["distributed_type"]) {
    const std::string v = upper(rd.str(n, "distributed_type"));
    if (v != "NO" && v != "MULTI_CPU" && v != "MULTI_GPU" && v != "DEEPSPEED" && v != "FSDP")
      rd.bad(n, "distributed_type", "NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP");
    c.distributed_type = v;
  }
  if (const YAML::Node n = root["num_processes"])
    c.num_processes = rd.integer(n, "num_processes", 1, 1 << 20);
  if (const YAML::Node n = root["num_machines"])
    c.num_machines = rd.integer(n, "num_machines", 1, 1 << 20);
  if (const YAML::Node n = root["machine_rank"])
    c.machine_rank = rd.integer(n, "machine_rank", 0, c.num_machines - 1);
  if (const YAML::Node n = root["main_process_ip"]; n && !n.IsNull())
    c.main_process_ip = rd.str(n, "main_process_ip");
  if (const YAML::Node n = root["main_process_port"]; n && !n.IsNull())
    c.main_process_port = rd.integer(n, "main_process_port", 1, 65535);
  if (const YAML::Node n = root["use_cpu"]) c.use_cpu = rd.boolean(n, "use_cpu");
  if (const YAML::Node n = root["mixed_precision"]) {
    const std::string v = rd.str(n, "mixed_precision");
    if (v != "no" && v != "bf16" && v != "fp16" && v != "fp8")
      rd.bad(n, "mixed_precision", "no, bf16, fp16 or fp8");
    c.mixed_precision = v;
  }

  const YAML::Node ds = root["deepspeed_config"];
  const YAML::Node fs = root["fsdp_config"];
  if (c.distributed_type == "DEEPSPEED") {
    if (!ds || ds.IsNull())
      rd.warn(fmt::format("{}: distributed_type DEEPSPEED without deepspeed_config: ZeRO stage 0",
                          origin));
    else
      read_deepspeed(rd, ds, base_dir);
  } else if (c.distributed_type == "FSDP") {
    read_fsdp(rd, fs && !fs.IsNull() ? fs : YAML::Node(YAML::NodeType::Map));
  } else {
    // accelerate ignores these sections unless the distributed_type selects them; so do we, but
    // say so when they ask for sharding.
    if (ds && ds.IsMap() && ds.size() > 0)
      rd.warn(fmt::format("{}: deepspeed_config is ignored with distributed_type {}", origin,
                          c.distributed_type));
    if (fs && fs.IsMap() && fs.size() > 0)
      rd.warn(fmt::format("{}: fsdp_config is ignored with distributed_type {}", origin,
                          c.distributed_type));
  }
  if (c.offload_param_device != "none")
    rd.warn(
        fmt::format("{}: parameter offload (offload_param_device: {}) is not supported; "
                    "parameters stay on the device",
                    origin, c.offload_param_device));
  return c;
}

AccelerateConfig parse_accelerate_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("accelerate config '{}' cannot be opened", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_accelerate_config_text(ss.str(), path, dir.empty() ? "." : dir);
}

}  // namespace zt::dist
