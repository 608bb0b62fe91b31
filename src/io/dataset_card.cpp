#include "io/dataset_card.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "core/error.h"
#include "core/file_util.h"
#include "io/data_files_pattern.h"
#include "io/hydra_yaml.h"
#include "io/unique_keys.h"
#include "io/yaml_load.h"

namespace zt {
namespace fs = std::filesystem;
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f'; }

// The YAML block of a card (huggingface_hub's REGEX_YAML_BLOCK,
// ^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))), preceded by as many newlines as precede it
// in `text`, so that YAML marks are the card's lines; nullopt when there is none.
std::optional<std::string> front_matter(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (text.compare(i, 4, "---\n") != 0) return std::nullopt;
  const size_t open = i;
  size_t body = open + 3;
  while (body < text.size() && text[body] == '\n') ++body;
  const auto closes_at = [&](size_t k) {  // text[k] == '\n' begins "[\n]+---(\n|$)"
    size_t r = k;
    while (r < text.size() && text[r] == '\n') ++r;
    return text.compare(r, 3, "---") == 0 && (r + 3 == text.size() || text[r + 3] == '\n');
  };
  size_t end = std::string::npos;
  for (size_t k = body; k < text.size() && end == std::string::npos; ++k)
    if (text[k] == '\n' && closes_at(k)) end = k;
  if (end == std::string::npos) {
    // The opening newlines give some back: an empty block ("---\n\n---").
    for (size_t k = open + 4; k < body && end == std::string::npos; ++k)
      if (closes_at(k)) end = body = k;
  }
  if (end == std::string::npos) return std::nullopt;
  const auto lines = static_cast<size_t>(
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(body), '\n'));
  return std::string(lines, '\n') + text.substr(body, end - body);
}

// The card's metadata as huggingface_hub reads it (yaml.safe_load: a key repeated in metadata
// zerotune does not read, or a U+2028 in a description, is no error), with `configs`, the part
// read here, checked strictly: given once, no key repeated inside it.
YAML::Node parse(const std::string& text, const std::string& file) {
  try {
    YAML::Node root = load_yaml(text, file, /*json=*/false, /*lenient=*/true);
    if (root.IsMap()) {
      int configs = 0;
      for (const auto& kv : root)
        if (kv.first.IsScalar() && kv.first.Scalar() == "configs" && ++configs > 1)
          fail(
              "{}:{}: key 'configs' given twice in the dataset card's metadata (which one "
              "applies would be unclear); keep one",
              file, kv.first.Mark().line + 1);
      if (const YAML::Node c = root["configs"]) check_unique_yaml_keys(c, file);
    }
    return root;
  } catch (const YAML::Exception& e) {
    fail("{}:{}:{}: YAML syntax error in the dataset card's metadata: {}", file, e.mark.line + 1,
         e.mark.column + 1, e.msg);
  }
}

std::string at(const std::string& file, const YAML::Node& n) {
  return fmt::format("{}:{}", file, n.Mark().line + 1);
}

// A scalar as PyYAML types it (yaml_scalar_to_json); sequences / mappings as null.
Json typed(const YAML::Node& n) {
  if (!n.IsScalar()) return nullptr;
  return yaml_scalar_to_json(n.Scalar(), n.Tag() == "!");
}

bool python_truthy(const YAML::Node& n) {
  if (!n || n.IsNull()) return false;
  if (n.IsSequence() || n.IsMap()) return n.size() > 0;
  const Json v = typed(n);
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return false;
}

bool is_string(const YAML::Node& n) { return n.IsScalar() && typed(n).is_string(); }

constexpr const char* kDataFilesShapes =
    "expected a pattern (data_files: data/train.parquet), a list of patterns (split 'train'), or a "
    "list of {split: NAME, path: PATTERN or list of patterns} (datasets' MetadataConfigs rule)";

std::vector<std::string> string_list(const YAML::Node& n, const std::string& file,
                                     const std::string& what) {
  std::vector<std::string> out;
  if (is_string(n)) return {n.Scalar()};
  if (!n.IsSequence())
    fail("{}: {} is no string or list of strings; {}", at(file, n), what, kDataFilesShapes);
  for (const auto& item : n) {
    if (!is_string(item))
      fail("{}: {} holds {}, no string; {}", at(file, item), what,
           item.IsScalar() ? "'" + item.Scalar() + "'"
           : item.IsMap()  ? "a mapping"
                           : "a list",
           kDataFilesShapes);
    out.push_back(item.Scalar());
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> data_files(const YAML::Node& n,
                                                                         const std::string& file,
                                                                         const std::string& key) {
  if (is_string(n)) return {{"train", {n.Scalar()}}};
  if (!n.IsSequence())
    fail("{}: {} is {}; {}", at(file, n), key, n.IsMap() ? "a mapping" : "'" + n.Scalar() + "'",
         kDataFilesShapes);
  const bool any_map =
      std::any_of(n.begin(), n.end(), [](const YAML::Node& i) { return i.IsMap(); });
  if (!any_map) return {{"train", string_list(n, file, key)}};
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& item : n) {
    if (!item.IsMap() || item.size() != 2 || !item["split"] || !item["path"])
      fail("{}: {}: each entry must be a mapping of exactly `split` and `path` when one is; {}",
           at(file, item), key, kDataFilesShapes);
    const YAML::Node split = item["split"];
    if (!is_string(split) || !valid_split_name(split.Scalar()))
      fail(
          "{}: {}: split '{}' is not a valid split name (datasets: letters, digits and '_', parts "
          "joined by '.': "
          "^\\w+(\\.\\w+)*$; '-' is not allowed)",
          at(file, split), key, split.IsScalar() ? split.Scalar() : "?");
    for (const auto& [s, _] : out)
      if (s == split.Scalar())
        fail(
            "{}: {}: split '{}' is given twice (datasets: \"Some splits are duplicated in "
            "data_files\")",
            at(file, split), key, s);
    out.push_back({split.Scalar(),
                   string_list(item["path"], file, key + " (split " + split.Scalar() + ") path")});
  }
  return out;
}

CardConfig read_config(const YAML::Node& n, size_t index, const std::string& file) {
  const std::string key = fmt::format("configs[{}]", index);
  if (!n.IsMap())
    fail(
        "{}: {} is no mapping; each config is a mapping with `config_name` (and `data_files`, "
        "`data_dir`, "
        "`default`)",
        at(file, n), key);
  CardConfig c;
  c.at = at(file, n);
  const YAML::Node name = n["config_name"];
  if (!name || !name.IsScalar() || name.IsNull())
    fail(
        "{}: {} has no `config_name` (datasets: \"Each config must include `config_name` field "
        "with a string name "
        "of a config\")",
        c.at, key);
  c.name = name.Scalar();
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    if (k == "config_name") continue;
    if (k == "data_files") {
      if (!kv.second.IsNull()) c.data_files = data_files(kv.second, file, key + ".data_files");
    } else if (k == "data_dir") {
      if (kv.second.IsNull()) continue;
      if (!is_string(kv.second)) fail("{}: {}.data_dir is no string", at(file, kv.second), key);
      c.data_dir = kv.second.Scalar();
      const fs::path d(c.data_dir);
      const bool up = std::any_of(d.begin(), d.end(), [](const fs::path& p) { return p == ".."; });
      if (d.is_absolute() || up || c.data_dir.find("://") != std::string::npos)
        fail(
            "{}: {}.data_dir '{}': expected a directory of the dataset repository, relative to its "
            "root "
            "(zerotune reads the snapshot's own files)",
            at(file, kv.second), key, c.data_dir);
    } else if (k == "default") {
      c.is_default = python_truthy(kv.second);
    } else if (k != "version" && k != "description") {  // BuilderConfig fields that read nothing
      c.other_keys.push_back(k);
    }
  }
  return c;
}

}  // namespace

DatasetCard read_dataset_card(const fs::path& dir) {
  const fs::path readme = dir / "README.md", extra = dir / ".huggingface.yaml";
  // The card's top-level entries: README.md's front matter, then .huggingface.yaml's over them.
  std::vector<std::pair<std::string, std::pair<YAML::Node, std::string>>> top;
  const auto take = [&](const YAML::Node& root, const std::string& file) {
    if (!root || root.IsNull()) return;
    if (!root.IsMap())
      fail(
          "{}: the dataset card's metadata is no mapping (huggingface_hub: \"repo card metadata "
          "block should be a "
          "dict\")",
          at(file, root));
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      auto it = std::find_if(top.begin(), top.end(), [&](const auto& e) { return e.first == k; });
      if (it == top.end())
        top.push_back({k, {kv.second, file}});
      else
        it->second = {kv.second, file};
    }
  };
  std::error_code ec;
  if (fs::is_regular_file(readme, ec)) {
    if (const auto yaml = front_matter(universal_newlines(read_file(readme))))
      take(parse(*yaml, readme.string()), readme.string());
  }
  if (fs::exists(extra, ec))
    take(parse(universal_newlines(read_file(extra)), extra.string()), extra.string());

  DatasetCard card;
  for (const auto& [k, v] : top) {
    const auto& [node, file] = v;
    if (k == "configs" && python_truthy(node)) {
      if (!node.IsSequence())
        fail(
            "{}: configs is {}; expected a list of configs (datasets: \"Expected configs to be a "
            "list\")",
            at(file, node), node.IsMap() ? "a mapping" : "'" + node.Scalar() + "'");
      for (size_t i = 0; i < node.size(); ++i) {
        CardConfig c = read_config(node[i], i, file);
        for (const CardConfig& o : card.configs)
          if (o.name == c.name)
            fail("{}: config_name '{}' is given twice (first at {})", c.at, c.name, o.at);
        card.configs.push_back(std::move(c));
      }
    } else if (k == "dataset_info") {
      const auto name_of = [](const YAML::Node& e) {
        const YAML::Node n = e.IsMap() ? e["config_name"] : YAML::Node();
        return n && n.IsScalar() && !n.IsNull() ? n.Scalar() : std::string("default");
      };
      std::vector<std::string>& names = card.info_configs;
      if (node.IsMap()) names.push_back(name_of(node));
      if (node.IsSequence())
        for (const auto& e : node)
          if (std::find(names.begin(), names.end(), name_of(e)) == names.end())
            names.push_back(name_of(e));
    }
  }
  return card;
}

}  // namespace zt
