// TensorBoard event files: CRC-32C, protobuf encoding, and the bytes of whole files against the
// reference written with tensorboard's protobuf classes + RecordWriter and read back by its
// EventAccumulator (tests/data/train/tb/, tools/make_train_goldens.py).
#include <gtest/gtest.h>

#include <cmath>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "io/tensorboard.h"
#include "train/metrics.h"

namespace zt::io {
namespace {

namespace fs = std::filesystem;
const fs::path kTb = fs::path(ZT_TEST_DATA) / "train" / "tb";

TEST(TensorBoard, Crc32cKnownValues) {
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);            // the CRC-32C check value
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8a9136aau);  // RFC 3720 B.4
  EXPECT_EQ(crc32c("6789", crc32c("12345")), 0xe3069283u);
  // Masked: rotate right 15 and add 0xa282ead8.
  const uint32_t c = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, EventEncoding) {
  // Event{step: 300, summary{value{tag: "a", simple_value: 1.0}}}, wall_time 0 omitted.
  EXPECT_EQ(encode_scalar_event(0.0, 300, "a", 1.0f),
            std::string("\x10\xac\x02\x2a\x0a\x0a\x08\x0a\x01"
                        "a"
                        "\x15\x00\x00\x80\x3f",
                        15));
  testing::expect_error([] { encode_scalar_event(1.0, 1, "", 0.0f); }, {"non-empty tag"});
  const std::string framed = tfrecord_frame("xy");
  ASSERT_EQ(framed.size(), 18u);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x02\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(12, 2), "xy");
  EXPECT_EQ(event_file_name(1700000000.9, "host", 12), "events.out.tfevents.1700000000.host.12");
}

// Writes the events that tools/make_train_goldens.py wrote with the reference implementation.
void write_reference_runs(const fs::path& dir) {
  {
    TensorBoardWriter w(
        dir, {.wall_time = 1700000000.25, .host = "testhost", .pid = 4242, .purge_step = {}});
    EXPECT_EQ(w.path().filename(), "events.out.tfevents.1700000000.testhost.4242");
    for (int step = 1; step <= 5; ++step) {
      const std::vector<std::pair<std::string, double>> v = {
          {"train/loss", 2.5 / step},
          {"train/grad_norm", 0.1 * step},
          {"train/learning_rate", 2e-5 * (6 - step) / 5},
          {"train/epoch", step / 5.0}};
      w.add_scalars(step, v, 1700000000.25 + step);
    }
    w.add_scalar("eval/loss", 1.75, 5, 1700000006.5);
    w.add_scalar("train/zero", 0.0, 0, 1700000006.5);
    w.add_scalar("train/negative", -3.0e38, 7, 1700000006.5);
  }
  TensorBoardWriter w(
      dir, {.wall_time = 1700000100.0, .host = "testhost", .pid = 4243, .purge_step = 3});
  for (int step = 3; step <= 4; ++step)
    w.add_scalar("train/loss", 10.0 + step, step, 1700000100.0 + step);
}

TEST(TensorBoard, FilesEqualTheReferenceBytes) {
  testing::TempDir d;
  write_reference_runs(d.path());
  const Json expected = Json::parse(read_file(kTb / "expected.json"));
  ASSERT_EQ(expected["files"].size(), 2u);
  EXPECT_EQ(testing::list_dir(d.path()), expected["files"].get<std::vector<std::string>>());
  for (const auto& name : expected["files"]) {
    const std::string ours = read_file(d / name.get<std::string>());
    const std::string ref = read_file(kTb / name.get<std::string>());
    EXPECT_EQ(ours.size(), ref.size()) << name;
    EXPECT_TRUE(ours == ref) << name << " differs from the reference bytes";
  }
}

TEST(TensorBoard, ReaderSawTheValuesWeWrote) {
  // What EventAccumulator read from the reference file equals our inputs rounded to float.
  const Json first = Json::parse(read_file(kTb / "expected.json"))["first_file"];
  ASSERT_EQ(first.size(), 7u);
  for (int step = 1; step <= 5; ++step) {
    const Json& loss = first["train/loss"][step - 1];
    EXPECT_EQ(loss[0].get<double>(), 1700000000.25 + step);
    EXPECT_EQ(loss[1].get<int64_t>(), step);
    EXPECT_EQ(loss[2].get<double>(), static_cast<double>(static_cast<float>(2.5 / step)));
    EXPECT_EQ(first["train/learning_rate"][step - 1][2].get<double>(),
              static_cast<double>(static_cast<float>(2e-5 * (6 - step) / 5)));
  }
  EXPECT_EQ(first["train/negative"][0][2].get<double>(), static_cast<double>(-3.0e38f));
  EXPECT_EQ(first["train/zero"][0][1].get<int64_t>(), 0);
  // After the resumed file's purge at step 3, the directory shows steps 1, 2 of the first run and
  // 3, 4 of the second for train/loss, and drops every step >= 3 of the other tags.
  const Json resumed = Json::parse(read_file(kTb / "expected.json"))["directory_after_resume"];
  const Json& loss = resumed["train/loss"];
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[2][2].get<double>(), 13.0);
  EXPECT_EQ(loss[3][1].get<int64_t>(), 4);
  EXPECT_EQ(resumed["eval/loss"].size(), 0u);
  EXPECT_EQ(resumed["train/epoch"].size(), 2u);
}

TEST(TensorBoard, MetricRecordGoesOutWithHfTags) {
  testing::TempDir d;
  zt::train::MetricRecord r;
  r.set("loss", 1.5);
  r.set("step", int64_t{10});
  {
    TensorBoardWriter w(d.path(), {.wall_time = 5.0, .host = "h", .pid = 1, .purge_step = {}});
    w.add_scalars(10, zt::train::tensorboard_scalars(r), 6.0);
  }
  const std::string bytes = read_file(d / "events.out.tfevents.0000000005.h.1");
  EXPECT_EQ(bytes, tfrecord_frame(encode_file_version_event(5.0)) +
                       tfrecord_frame(encode_scalar_event(6.0, 10, "train/loss", 1.5f)));
  testing::expect_error(
      [&] {
        TensorBoardWriter w(d.path(), {.wall_time = 5.0, .host = "h", .pid = 1, .purge_step = {}});
      },
      {"events.out.tfevents.0000000005.h.1", "cannot create"});
}

}  // namespace
}  // namespace zt::io
