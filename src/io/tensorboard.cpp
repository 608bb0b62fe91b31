#include "io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace zt::io {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format pieces.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}
void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
// Event.wall_time (1, double) and Event.step (2, int64); proto3 omits zeros.
void put_event_header(std::string& out, double wall_time, int64_t step) {
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof bits);
  if (bits != 0) {
    put_tag(out, 1, 1);
    put_fixed(out, bits, 8);
  }
  if (step != 0) {
    put_tag(out, 2, 0);
    put_varint(out, static_cast<uint64_t>(step));  // negative int64: 10-byte two's complement
  }
}

}  // namespace

uint32_t crc32c(std::string_view data, uint32_t crc) {
  crc = ~crc;
  for (unsigned char ch : data) crc = kCrc32cTable[(crc ^ ch) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view payload) {
  std::string len;
  put_fixed(len, payload.size(), 8);
  std::string out = len;
  put_fixed(out, masked_crc32c(len), 4);
  out.append(payload);
  put_fixed(out, masked_crc32c(payload), 4);
  return out;
}

std::string encode_file_version_event(double wall_time, std::string_view writer) {
  std::string out;
  put_event_header(out, wall_time, 0);
  put_bytes_field(out, 3, "brain.Event:2");
  if (!writer.empty()) {
    std::string meta;
    put_bytes_field(meta, 1, writer);
    put_bytes_field(out, 10, meta);
  }
  return out;
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  if (tag.empty()) fail("tensorboard: a scalar needs a non-empty tag (step {})", step);
  std::string val;
  put_bytes_field(val, 1, tag);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(val, 2, 5);  // simple_value is in a oneof: written even when 0
  put_fixed(val, bits, 4);
  std::string summary;
  put_bytes_field(summary, 1, val);
  std::string out;
  put_event_header(out, wall_time, step);
  put_bytes_field(out, 5, summary);
  return out;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string log;
  put_tag(log, 1, 0);
  put_varint(log, 1);  // SessionLog.START
  std::string out;
  put_event_header(out, wall_time, step);
  put_bytes_field(out, 7, log);
  return out;
}

std::string event_file_name(double wall_time, std::string_view host, int64_t pid) {
  return fmt::format("events.out.tfevents.{:010d}.{}.{}",
                     static_cast<int64_t>(std::floor(wall_time)), host, pid);
}

double unix_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& log_dir, const Options& options) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec)
    fail("tensorboard: cannot create the log directory {}: {}", log_dir.string(), ec.message());
  const double t0 = options.wall_time >= 0 ? options.wall_time : unix_time_now();
  std::string host = options.host;
  if (host.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) std::snprintf(buf, sizeof buf, "localhost");
    host = buf;
  }
  const int64_t pid = options.pid >= 0 ? options.pid : static_cast<int64_t>(getpid());
  path_ = log_dir / event_file_name(t0, host, pid);
  file_ = std::fopen(path_.c_str(), "wbx");  // x: fail when it exists
  if (!file_)
    fail("tensorboard: cannot create the event file {}: {}", path_.string(), std::strerror(errno));
  write_record(encode_file_version_event(t0));
  if (options.purge_step) write_record(encode_session_start_event(t0, *options.purge_step));
  if (std::fflush(file_) != 0)
    fail("tensorboard: cannot write {}: {}", path_.string(), std::strerror(errno));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_record(std::string_view payload) {
  const std::string rec = tfrecord_frame(payload);
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size())
    fail("tensorboard: cannot write {}: {}", path_.string(), std::strerror(errno));
}

void TensorBoardWriter::add_scalars(int64_t step,
                                    std::span<const std::pair<std::string, double>> values,
                                    double wall_time) {
  const double t = wall_time >= 0 ? wall_time : unix_time_now();
  for (const auto& [tag, v] : values)
    write_record(encode_scalar_event(t, step, tag, static_cast<float>(v)));
  if (std::fflush(file_) != 0)
    fail("tensorboard: cannot write {}: {}", path_.string(), std::strerror(errno));
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step,
                                   double wall_time) {
  const std::pair<std::string, double> one{std::string(tag), value};
  add_scalars(step, std::span(&one, 1), wall_time);
}

}  // namespace zt::io
