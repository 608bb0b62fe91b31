// An `image` / `images` column in the train set is refused, as TRL 0.25.1's SFTTrainer refuses it
// for a text-only model (sft_trainer.py: `"image" in dataset_sample or "images" in
// dataset_sample` on the train set's first row, before any column is removed). The eval set is not
// looked at by that check (TRL drops the column there), nor by zerotune's.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>

#include "data/prepare.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::TempDir;
using zt::testing::write_file;

DataOptions options(const std::filesystem::path& dataset, const std::string& split) {
  DataOptions o;
  o.dataset = dataset;
  o.num_threads = 1;
  o.names.split = split;
  o.names.dataset_key = "dataset." + split + ".path";
  return o;
}

const std::string kVision =
    ": a vision dataset; zerotune trains text-only models (TRL 0.25.1 refuses it too for a model "
    "that is not a "
    "vision-language model: \"The dataset appears to be vision-related (contains 'image' or "
    "'images' keys)\"). "
    "Remove the column from the file to train on the text";

TEST(VisionColumns, JsonImagesColumnOfALaterRowIsRefusedInTheTrainSet) {
  TempDir dir;
  const auto f = dir / "v.jsonl";
  // Row 0 has no "images": `datasets` still gives row 0 every column (null), and TRL looks at keys.
  write_file(f,
             "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
             "{\"prompt\": \"c\", \"completion\": \"d\", \"images\": [\"x.png\"]}\n");
  const auto& q = zt::testing::qwen_tokenizer();
  EXPECT_EQ(error_of([&] { build_token_data(options(f, "train"), q.tok, q.cfg); }),
            f.string() + " (the train set, dataset.train.path): column 'images'" + kVision);
  // The eval set: no check (TRL checks the train set only), the rows train on their text.
  EXPECT_EQ(build_token_data(options(f, "eval"), q.tok, q.cfg).example_rows,
            (std::vector<int64_t>{0, 1}));
}

TEST(VisionColumns, ParquetImageStructIsRefusedThoughItIsNotRead) {
  TempDir dir;
  arrow::StringBuilder p, c, path;
  arrow::BinaryBuilder bytes;
  std::shared_ptr<arrow::Array> pa, ca, patha, bytesa;
  ASSERT_TRUE(p.Append("hi").ok() && c.Append("there").ok() && path.Append("a.png").ok() &&
              bytes.Append("\x89PNG").ok());
  ASSERT_TRUE(p.Finish(&pa).ok() && c.Finish(&ca).ok() && path.Finish(&patha).ok() &&
              bytes.Finish(&bytesa).ok());
  auto image = arrow::StructArray::Make(arrow::ArrayVector{bytesa, patha},
                                        std::vector<std::string>{"bytes", "path"})
                   .ValueOrDie();
  const auto f = dir / "img.parquet";
  auto table = arrow::Table::Make(arrow::schema({arrow::field("prompt", arrow::utf8()),
                                                 arrow::field("completion", arrow::utf8()),
                                                 arrow::field("image", image->type())}),
                                  {pa, ca, image});
  auto out = arrow::io::FileOutputStream::Open(f.string()).ValueOrDie();
  ASSERT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, 16).ok());
  ASSERT_TRUE(out->Close().ok());
  const auto& q = zt::testing::qwen_tokenizer();
  ::testing::internal::CaptureStderr();
  const std::string msg = error_of([&] { build_token_data(options(f, "train"), q.tok, q.cfg); });
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(msg, f.string() + " (the train set, dataset.train.path): column 'image'" + kVision);
}

}  // namespace
}  // namespace zt::data
