// Streaming reader of a `tokenizer.json`: parses the file with a SAX handler that collects
// model.vocab and model.merges straight into vectors (the bulk of the file: 151k entries each for
// Qwen) and builds a JSON tree for everything else. About twice as fast as a full DOM parse.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"
#include "text/bpe_model.h"

namespace zt::text {

struct TokenizerJson {
  // The whole document except model.vocab (when it is an object) and model.merges.
  Json rest;
  bool has_vocab = false;   // model.vocab was an object and is in bpe.vocab
  bool has_merges = false;  // model.merges was an array and is in bpe.merges
  // Merges in rank order; "a b" strings are split at their single space.
  BpeSource bpe;
};

// Reads and parses `path`. Throws zt::Error naming the file for I/O errors, invalid JSON (with the
// byte offset), a non-integer vocab id ("model.vocab['x']") or a malformed merge
// ("model.merges[3]: expected \"a b\" or [\"a\", \"b\"]").
TokenizerJson read_tokenizer_json(const std::filesystem::path& path);

// Typed access to the parsed tree; errors name the file and the field path ("pre_tokenizer.
// pretokenizers[0].type").
namespace json_fields {
// obj[key], or nullptr when absent.
const Json* member(const Json& obj, const char* key);
// obj[key] as a bool / string; `dflt` / nullopt when absent or null; throws for another type.
bool get_bool(const Json& obj, const char* key, bool dflt, const std::string& file,
              const std::string& path);
std::optional<std::string> get_string(const Json& obj, const char* key, const std::string& file,
                                      const std::string& path);
// The "type" of a component object; throws when obj is not an object or has no type.
std::string type_of(const Json& obj, const std::string& file, const std::string& path);
// obj[key], which must be an array.
const Json& get_array(const Json& obj, const char* key, const std::string& file,
                      const std::string& path);
}  // namespace json_fields

}  // namespace zt::text
