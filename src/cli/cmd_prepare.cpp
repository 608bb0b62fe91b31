// `zerotune prepare --config sft.yaml [key=value …]`: builds (or finds) the token caches of the
// train and eval splits and prints what was read, kept and dropped (SFT_SEMANTICS §1–2).
#include <CLI/CLI.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/data_setup.h"
#include "core/log.h"
#include "data/prepare.h"

namespace zt::cli {

constexpr CommandUsage kUsage{"prepare", "--config sft.yaml [--json] [key.path=value …]"};

int cmd_prepare(const Args& args) {
  CLI::App app{"Tokenise and mask the configured datasets into the token cache, and report"};
  ConfigFileOption file;
  std::string config;
  std::vector<std::string> overrides;
  bool json = false;
  add_config_file_option(app, file);
  app.add_flag("--json", json, "print the reports as JSON lines instead of text");
  app.add_option("overrides", overrides, "key.path=value overrides");
  if (auto rc = refuse_multirun(args, kUsage)) return *rc;
  if (auto rc = parse_command_line(app, kUsage, with_hydra_long_flags(args))) return *rc;
  if (auto rc = config_file_of(file, kUsage, &config)) return *rc;
  RunConfig cfg = RunConfig::load(config, overrides);
  for (const auto& n : cfg.notes()) log::info("{}", n);
  check_dataset_kwargs(cfg, [](const std::string& m) { log::warn("{}", m); });
  TokenizerBundle tok = load_tokenizer(cfg);
  data::PrepareReport train_report;
  for (std::string split : {"train", "eval"}) {
    if (split == "eval" && !has_eval_set(cfg)) continue;
    check_dataset_present(cfg, split);
    data::DataOptions opts = data_options(cfg, split);
    if (split == "eval") opts = data::eval_options(opts, train_report);
    data::PrepareReport report;
    data::prepare_dataset(opts, tok.tokenizer, tok.config, &report);
    if (json) {
      Json j = report.to_json();
      j["split"] = split;
      fmt::print("{}\n", j.dump());
    } else {
      fmt::print("[{}] {}\n{}\n", split, opts.dataset.string(), report.summary());
    }
    if (split == "train") train_report = report;
  }
  return 0;
}

}  // namespace zt::cli
