// TensorBoard event files, written without a protobuf library (DESIGN §9): scalars as TensorBoard
// and torch's SummaryWriter write them, readable by `tensorboard` (EventAccumulator).
//
// File: `events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>` in the log directory; a
// sequence of TFRecords, each `uint64 length | uint32 masked_crc32c(length bytes) | data |
// uint32 masked_crc32c(data)` (little-endian; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8,
// CRC-32C = Castagnoli, reflected polynomial 0x82f63b78). Each record's data is a protobuf
// `tensorboard.Event` (proto3, fields in number order, defaults omitted):
//   wall_time double = 1 (seconds since the epoch), step int64 = 2, file_version string = 3,
//   summary Summary = 5, session_log SessionLog = 7, source_metadata SourceMetadata = 10;
//   Summary { repeated Value value = 1 }, Value { tag string = 1, simple_value float = 2 },
//   SessionLog { status enum = 1 (START = 1) }, SourceMetadata { writer string = 1 }.
// The first record is {wall_time, file_version "brain.Event:2", source_metadata "zerotune"}; each
// scalar is one event with one value (as SummaryWriter.add_scalar writes it). Checked byte for byte
// against protobuf + tensorboard's RecordWriter (tests/data/train/tb/).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zt::io {

// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
uint32_t crc32c(std::string_view data, uint32_t crc = 0);
// TFRecord's masked CRC: rotate right by 15, add 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);
// One TFRecord around `payload` (16 bytes of framing + payload).
std::string tfrecord_frame(std::string_view payload);

// Serialized `Event` messages (the record payloads). Throws zt::Error for an empty tag.
std::string encode_file_version_event(double wall_time, std::string_view writer = "zerotune");
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
// SessionLog START at `step`: TensorBoard then hides every earlier-written event with step >= it
// (how a resumed run replaces the steps logged after its checkpoint; SummaryWriter `purge_step`).
std::string encode_session_start_event(double wall_time, int64_t step);

// "events.out.tfevents.<%010d wall seconds>.<host>.<pid>".
std::string event_file_name(double wall_time, std::string_view host, int64_t pid);

// Where and how TensorBoardWriter creates its file (all fields injectable for tests).
struct TensorBoardWriterOptions {
  double wall_time = -1;              // file creation time; < 0: now
  std::string host;                   // empty: gethostname()
  int64_t pid = -1;                   // < 0: getpid()
  std::optional<int64_t> purge_step;  // resume: write a SessionLog START at this step
};

// Appends scalar events to one event file. Not thread-safe; one writer per run (rank 0).
class TensorBoardWriter {
 public:
  using Options = TensorBoardWriterOptions;
  // Creates `log_dir` (and parents) and the event file, writes the file_version record (and the
  // purge record) and flushes. Throws zt::Error naming the path and errno text on failure, or
  // when the file already exists.
  explicit TensorBoardWriter(const std::filesystem::path& log_dir, const Options& options = {});
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event per (tag, value), all with this step and wall time (now when < 0); values are
  // rounded to float as TensorBoard stores them. Flushed to the OS before returning. Throws
  // zt::Error on a write failure.
  void add_scalars(int64_t step, std::span<const std::pair<std::string, double>> values,
                   double wall_time = -1);
  void add_scalar(std::string_view tag, double value, int64_t step, double wall_time = -1);

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(std::string_view payload);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Seconds since the Unix epoch, as Python's time.time().
double unix_time_now();

}  // namespace zt::io
