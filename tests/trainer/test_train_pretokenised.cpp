// `zerotune train` on a pre-tokenised dataset (an `input_ids` column) through the real binary:
// the examples of a text dataset, written as input_ids + labels (-100 where the target flag is
// 0), train the same numbers, bitwise, as the text they came from.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "data/token_cache.h"
#include "io/json.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::run;
using zt_test::slurp;
using zt_test::train_events;

TEST(TrainPretokenised, TheTokensOfATextDatasetTrainTheSameNumbers) {
  const fs::path root = fs::temp_directory_path() / ("zt_train_pretok_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  auto r = run(std::string(ZT_BINARY) + " make-demo-data --out " + (root / "data").string() +
               " --train-rows 24 --test-rows 6 --seed 7");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string src = ZT_SOURCE_DIR;
  const auto train = [&](const std::string& name, const fs::path& data,
                         const std::string& extra = "") {
    return run(
        std::string(ZT_BINARY) + " train --config " + src +
        "/configs/default.yaml exp_dir=" + (root / name).string() + " model.name_or_path=" + src +
        "/configs/models/tiny-qwen2 model.tokenizer_name_or_path=" + src +
        "/configs/tokenizers/qwen2.5-instruct compute.n_gpus=1 compute.backend=cpu "
        "compute.global_batch_size=4 trainer.per_device_train_batch_size=2 "
        "trainer.max_steps=3 trainer.logging_steps=1 trainer.eval_steps=3 "
        "trainer.report_to=none dataset.train.path=" +
        data.string() + " dataset.eval.path=" + (root / "data/test.parquet").string() + extra);
  };
  r = train("text", root / "data/train.parquet");
  ASSERT_EQ(r.status, 0) << r.output;

  // The text run's token cache of the training set (prompt_format: chat, max_length 128).
  fs::path cache;
  for (const auto& e : fs::directory_iterator(root / "text/cache"))
    if (e.path().extension() == ".ztc" && e.path().filename().string().starts_with("train-"))
      cache = e.path();
  ASSERT_FALSE(cache.empty());
  const zt::data::PreparedDataset ds = zt::data::PreparedDataset::open(cache);
  ASSERT_EQ(ds.num_examples(), 24);
  std::ofstream out(root / "train_ids.jsonl");
  for (int64_t e = 0; e < ds.num_examples(); ++e) {
    ASSERT_EQ(ds.source_row(e), e);
    zt::Json row = {{"input_ids", zt::Json::array()}, {"labels", zt::Json::array()}};
    const auto ids = ds.tokens(e);
    const auto targets = ds.targets(e);
    for (size_t t = 0; t < ids.size(); ++t) {
      row["input_ids"].push_back(ids[t]);
      row["labels"].push_back(targets[t] ? ids[t] : -100);
    }
    out << row.dump() << "\n";
  }
  out.close();

  // TRL decides an unset completion_only_loss on the train set's row 0 for the eval set too: with
  // pre-tokenised training rows it is false, and the (text) eval set would train its prompts.
  // Set, the eval set is masked as in the text run.
  r = train("ids", root / "train_ids.jsonl", " trainer.completion_only_loss=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("pre-tokenised rows: targets from input_ids, labels; columns not read "
                          "(as TRL 0.25.1's collator): none"),
            std::string::npos)
      << r.output;
  // The users' layout implies prompt_format: chat; it formats nothing here.
  EXPECT_NE(r.output.find("(pre-tokenised): dataset.prompt_format: chat has no effect"),
            std::string::npos)
      << r.output;
  const auto text_events = train_events(root / "text");
  ASSERT_EQ(text_events.size(), 4u);  // 3 logs + 1 eval
  EXPECT_EQ(train_events(root / "ids"), text_events);
  EXPECT_TRUE(slurp(root / "ids/final/model.safetensors") ==
              slurp(root / "text/final/model.safetensors"));
  // Unset, the eval set follows the pre-tokenised train set: its prompt tokens count too.
  r = train("ids_auto", root / "train_ids.jsonl");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto auto_events = train_events(root / "ids_auto");
  ASSERT_EQ(auto_events.size(), 4u);
  EXPECT_EQ(auto_events[2], text_events[2]);  // the training steps: the same
  EXPECT_GT(auto_events[3]["eval_loss"], 0.0);
  EXPECT_NE(auto_events[3]["eval_loss"], text_events[3]["eval_loss"]);
  fs::remove_all(root);
}

}  // namespace
