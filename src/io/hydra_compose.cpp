#include "io/hydra_compose.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "io/hydra_yaml.h"

// The rules below are Hydra 1.3's (hydra/_internal/defaults_list.py, core/default_element.py,
// _internal/config_loader_impl.py), read for behaviour and written here from scratch; the
// golden tests (tests/data/io/hydra_compose, tools/make_hydra_goldens.py) compare with Hydra.

namespace zt {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string dots(std::string s) {
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

// "a/b/c" -> "a/b"; "c" -> "".
std::string dir_part(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

std::string join_path(const std::string& base, const std::string& rel) {
  if (base.empty()) return rel;
  if (rel.empty()) return base;
  return base + "/" + rel;
}

std::string strip_slash(const std::string& s) {
  return !s.empty() && s[0] == '/' ? s.substr(1) : s;
}

// One element of a defaults list: `_self_`, a config-group entry (`db: mysql`), a plain config
// entry (`- base`), or an entry of Hydra's own groups (`override hydra/job_logging: disabled`).
struct Entry {
  enum class Kind { kSelf, kGroup, kConfig, kHydra };
  Kind kind = Kind::kGroup;
  std::string group;  // kGroup: the group as written ("db", "/db"); kConfig: the path as written
  Json value;         // kGroup: the option (string), options (array) or null
  std::optional<std::string> package;  // the entry's "@package" ("" for _here_)
  bool optional = false, override_ = false, appended = false;
  std::string where;      // "<file>: defaults: entry {...}" or "override '+db=x'"
  std::string text;       // the entry as JSON, or the command-line override as given
  std::string chosen_by;  // where a choice override that replaced `value` was given
  // Set from the config that holds the entry, before the entry is expanded:
  std::string base_dir;               // that config's group path
  std::string parent_package;         // that config's final package
  std::optional<std::string> header;  // this entry's file's `# @package` (absolute, "_global_…")
  bool deleted = false;

  bool is_group() const { return kind == Kind::kGroup; }
  bool has_name() const { return kind != Kind::kGroup || value.is_string(); }
  std::string name() const {  // the option (kGroup) or the file name (kConfig)
    if (kind == Kind::kGroup) return value.is_string() ? value.get<std::string>() : "";
    const size_t slash = group.rfind('/');
    return slash == std::string::npos ? group : group.substr(slash + 1);
  }
  // The group's path from the config directory ("server/db").
  std::string group_path() const {
    const bool absolute = !group.empty() && group[0] == '/';
    const std::string g = kind == Kind::kGroup ? strip_slash(group) : dir_part(strip_slash(group));
    return absolute ? g : join_path(base_dir, g);
  }
  // The config's path from the config directory, without ".yaml" ("server/db/mysql").
  std::string config_path() const {
    if (kind == Kind::kGroup) return group_path() + "/" + name();
    const bool absolute = !group.empty() && group[0] == '/';
    return absolute ? strip_slash(group) : join_path(base_dir, group);
  }
  // Where the contents go: the entry's package (relative to the containing config's), else the
  // file's header (absolute), else the group written relative ("/db" and "db" both give "db").
  std::string final_package(bool with_header = true) const {
    std::string pkg;
    if (package) {
      pkg = *package;
    } else if (with_header && header) {
      pkg = *header;
    } else {
      pkg = dots(kind == Kind::kGroup ? strip_slash(group) : dir_part(strip_slash(group)));
    }
    std::string ret = parent_package.empty() ? pkg
                      : pkg.empty()          ? parent_package
                                             : parent_package + "." + pkg;
    const size_t g = ret.rfind("_global_");
    if (g == std::string::npos) return ret;
    return g + 9 >= ret.size() ? "" : ret.substr(g + 9);
  }
  // The key a command-line override uses for this entry: the group path, with "@package" when
  // the package is not the default one ("db@backup", "db@_global_").
  std::string override_key() const {
    const std::string gp = group_path(), fp = final_package(false);
    if (dots(gp) == fp) return gp;
    return gp + "@" + (fp.empty() ? "_global_" : fp);
  }
  bool is_self() const { return kind == Kind::kSelf; }
};

// A config file as read: its contents without `defaults`, its defaults list, its package header.
struct Loaded {
  fs::path file;
  Json content;
  std::vector<Entry> defaults;
  std::optional<std::string> header;
  std::vector<NonStringKey> non_string_keys;  // parents relative to the file's top
  KeyOrigins origins;                         // key paths relative to the file's top
};

// A node of the defaults tree: an entry, and the entries of its file's defaults list.
struct Node {
  Entry entry;
  bool primary = false;
  std::vector<Node> children;  // in defaults-list order; empty: the node is a leaf
  bool deferred = false;       // its option interpolates other groups' choices: expanded last
  const Loaded* loaded = nullptr;
};

// One config of the composed list: its contents go under `package`.
struct Part {
  const Loaded* loaded;
  std::string package;
  std::string override_key;  // groups only
  std::string where;
};

// Hydra's `# @package PKG` header: the comment lines at the top of the file, up to the first other
// line. PKG is absolute; "_global_" is the top.
std::optional<std::string> package_header(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  std::optional<std::string> pkg;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    if (line[b] != '#') break;
    const size_t at = line.find_first_not_of("# \t", b);
    if (at == std::string::npos || line[at] != '@') break;
    std::istringstream words(line.substr(at));
    std::string key, value, extra;
    words >> key >> value >> extra;
    if (value.empty() || !extra.empty())
      fail("{}: header '{}': expected '# @KEY VALUE'", file.string(), line);
    if (key != "@package") continue;
    if (value.find("_group_") != std::string::npos || value.find("_name_") != std::string::npos)
      fail(
          "{}: header '{}': Hydra 1.0's _group_ / _name_ keywords are not supported (Hydra 1.2 "
          "dropped them): write the package",
          file.string(), line);
    pkg = value == "_global_" || value.rfind("_global_.", 0) == 0 ? value : "_global_." + value;
  }
  return pkg;
}

// Reads one defaults list, in Hydra's grammar: `_self_`; `path[@pkg]`;
// `[optional] [override] group[@pkg]: option | [options] | null`.
std::vector<Entry> parse_defaults(const Json& list, const fs::path& file) {
  if (!list.is_array())
    fail("{}: defaults: expected a list (Hydra's defaults list), got {}", file.string(),
         list.dump());
  std::vector<Entry> out;
  for (const Json& item : list) {
    Entry e;
    e.text = item.dump();
    e.where = fmt::format("{}: defaults: entry {}", file.string(), e.text);
    std::string key;
    if (item.is_string()) {
      key = item.get<std::string>();
      e.kind = key == "_self_" ? Entry::Kind::kSelf : Entry::Kind::kConfig;
    } else if (item.is_object() && item.size() == 1) {
      e.kind = Entry::Kind::kGroup;
      std::istringstream words(item.begin().key());
      std::vector<std::string> w;
      for (std::string s; words >> s;) w.push_back(s);
      if (w.empty()) fail("{}: the group name is empty", e.where);
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        if (w[i] == "optional") {
          e.optional = true;
        } else if (w[i] == "override") {
          e.override_ = true;
        } else {
          fail("{}: '{}' is not a keyword of a defaults entry (optional, override)", e.where, w[i]);
        }
      }
      key = w.back();
      e.value = item.begin().value();
      const auto is_name = [](const Json& v) { return v.is_string(); };
      if (!(e.value.is_null() || e.value.is_string() ||
            (e.value.is_array() && std::all_of(e.value.begin(), e.value.end(), is_name))))
        fail("{}: the option must be a name, a list of names or null, got {}", e.where,
             e.value.dump());
      if (e.value.is_array())
        for (const Json& o : e.value)
          if (o.get<std::string>().find("${") != std::string::npos)
            fail("{}: an interpolation in an options list is not supported (as in Hydra)", e.where);
    } else {
      fail("{}: not a Hydra defaults entry (`_self_`, `group: option`, `config`)", e.where);
    }
    const size_t at = key.find('@');
    if (at != std::string::npos) {
      if (e.kind == Entry::Kind::kSelf || key.substr(0, at) == "_self_")
        fail("{}: _self_@PACKAGE is not supported (as in Hydra)", e.where);
      std::string pkg = key.substr(at + 1);
      if (pkg.find("_group_") != std::string::npos || pkg.find("_name_") != std::string::npos)
        fail("{}: Hydra 1.0's _group_ / _name_ keywords are not supported: write the package",
             e.where);
      e.package = pkg == "_here_" ? "" : pkg;
      key = key.substr(0, at);
    }
    if (key.find("${") != std::string::npos)
      fail("{}: an interpolation in a config path or group name is not supported by zerotune",
           e.where);
    if (key.empty() || key == "/") fail("{}: the group name is empty", e.where);
    e.group = key;
    const std::string bare = strip_slash(key);
    if (e.kind != Entry::Kind::kSelf && (bare == "hydra" || bare.rfind("hydra/", 0) == 0))
      e.kind = Entry::Kind::kHydra;  // Hydra's own settings: accepted, nothing to merge
    out.push_back(std::move(e));
  }
  return out;
}

class Composer {
 public:
  Composer(const fs::path& primary, const std::vector<GroupOverride>& overrides,
           std::vector<std::string>* notes)
      : primary_(primary), dir_(primary.parent_path()), notes_(notes) {
    for (const auto& o : overrides) {
      if (o.op == GroupOverride::Op::kDelete) {
        deletions_.push_back({o.key, o.value, o.text, false});
      } else if (o.op == GroupOverride::Op::kAppend) {
        Entry e;
        e.kind = Entry::Kind::kGroup;
        e.appended = true;
        e.where = fmt::format("override '{}'", o.text);
        e.text = o.text;
        const size_t at = o.key.find('@');
        e.group = o.key.substr(0, at);
        if (at != std::string::npos) e.package = o.key.substr(at + 1);
        e.value = o.value;
        appends_.push_back(std::move(e));
      } else {
        if (find_choice(o.key) == nullptr)
          choices_.push_back({o.key, o.value, fmt::format("override '{}'", o.text), o.text, false});
      }
    }
  }

  // The composed config; `non_string_keys` (when given) receives the keys of its configs that
  // PyYAML types as other than a string, each parent the key path in the composed config, and
  // `origins` (when given) the file and line of each key there.
  Json compose(std::vector<NonStringKey>* non_string_keys, KeyOrigins* origins) {
    Node root;
    root.primary = true;
    root.entry.kind = Entry::Kind::kConfig;
    root.entry.group = primary_.stem().string();
    root.entry.where = primary_.string();
    expand(root);
    for (const auto& c : choices_)
      if (!c.used) unused_choice(c);
    for (const auto& d : deletions_)
      if (!d.used) unused_deletion(d);
    std::vector<Part> parts;
    collect(root, parts);
    std::map<std::string, std::string> seen;
    for (const auto& p : parts) {
      if (p.override_key.empty()) continue;
      if (!seen.emplace(p.override_key, p.where).second)
        fail("{}: config group '{}' appears twice in the composed defaults list (also {})", p.where,
             p.override_key, seen[p.override_key]);
    }
    Json cfg = Json::object();
    for (const auto& p : parts) {
      Json part = p.loaded->content;
      if (!p.package.empty()) {
        const auto keys = split_key_path(p.package);
        for (auto k = keys.rbegin(); k != keys.rend(); ++k) part = Json{{*k, std::move(part)}};
      } else if (!part.is_object()) {
        fail("{}: the top level must be a mapping to merge it at the top of the config",
             p.loaded->file.string());
      }
      merge_config(cfg, part, "", p.loaded->file.string());
      const auto in_package = [&](const std::string& path) {
        return p.package.empty() ? path : path.empty() ? p.package : p.package + "." + path;
      };
      if (origins != nullptr)
        for (const auto& [path, o] : p.loaded->origins.at) origins->at[in_package(path)] = o;
      if (non_string_keys == nullptr) continue;
      for (NonStringKey k : p.loaded->non_string_keys) {
        k.parent = in_package(k.parent);
        non_string_keys->push_back(std::move(k));
      }
    }
    cfg.erase("hydra");
    return cfg;
  }

 private:
  struct Choice {
    std::string key;
    Json value;
    std::string where;
    std::string cli;  // the command-line override as given; empty: an `override` entry
    bool used;
  };
  struct Deletion {
    std::string key;
    Json value;  // null: whatever option
    std::string text;
    bool used;
  };
  struct Known {
    Json value;
    std::string where;
    std::string added_by;  // the `+group=option` override that listed it; empty: a file did
  };

  Choice* find_choice(const std::string& key) {
    for (auto& c : choices_)
      if (c.key == key) return &c;
    return nullptr;
  }

  fs::path file_of(const std::string& config_path) const {
    const bool has_ext =
        config_path.size() >= 5 && config_path.compare(config_path.size() - 5, 5, ".yaml") == 0;
    return dir_ / (has_ext ? config_path : config_path + ".yaml");
  }

  std::string options_of(const std::string& group) const {
    std::vector<std::string> opts;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir_ / group, ec))
      if (f.is_regular_file(ec) && f.path().extension() == ".yaml")  // a symlink loop: not one
        opts.push_back(f.path().stem().string());
    std::sort(opts.begin(), opts.end());
    return opts.empty() ? "none" : join(opts, ", ");
  }

  const Loaded& load(const fs::path& file) {
    auto it = cache_.find(file.string());
    if (it != cache_.end()) return it->second;
    Loaded l;
    l.file = file;
    l.header = package_header(file);
    l.content = load_yaml_file(file, &l.non_string_keys, &l.origins);
    if (l.content.is_null()) l.content = Json::object();
    if (l.content.is_object() && l.content.contains("defaults")) {
      l.defaults = parse_defaults(l.content["defaults"], file);
      l.content.erase("defaults");
    }
    return cache_.emplace(file.string(), std::move(l)).first->second;
  }

  // The parent's group path and final package become the entry's base (Hydra's update_parent).
  static void set_parent(Entry& e, const Entry& parent) {
    e.base_dir = parent.group_path();
    e.parent_package = parent.final_package();
  }

  bool is_deleted(const Entry& e) {
    if (!e.is_group()) return false;
    const std::string key = e.override_key();
    for (auto& d : deletions_)
      if (d.key == key && (d.value.is_null() || d.value == e.value)) return d.used = true;
    return false;
  }

  void set_known_choice(const Entry& e) {
    if (!e.is_group()) return;
    const std::string key = e.override_key();
    known_groups_[e.group_path()].insert(key);
    const std::string& where = e.chosen_by.empty() ? e.where : e.chosen_by;
    auto [it, fresh] = known_.emplace(key, Known{e.value, where, e.appended ? e.text : ""});
    if (fresh || it->second.value == e.value) return;
    const Known& other = it->second;
    if (e.appended || !other.added_by.empty()) {  // `+group=option` for a group already listed
      const std::string& added = e.appended ? e.text : other.added_by;
      fail(
          "override '{}': config group '{}' is already in the defaults list ({}); choose its "
          "option with {} (without '+')",
          added, key, e.appended ? other.where : where, added.substr(1));
    }
    fail(
        "{}: config group '{}' is chosen again by {}; keep one entry, or change its option with "
        "'override {}: <option>' at the end of the list",
        where, key, other.where, key);
  }

  // Hydra's _validate_self: `_self_` at most once; when absent from a list with other entries than
  // overrides (or from an empty list), it goes last.
  void validate_self(const Node& node, std::vector<Entry>& defaults) {
    bool has_self = false, has_non_override = false, has_own = false;
    for (const auto& d : defaults) {
      if (!d.override_) has_non_override = true;
      if (d.kind == Entry::Kind::kGroup || d.kind == Entry::Kind::kConfig) has_own = true;
      if (d.is_self()) {
        if (has_self) fail("{}: defaults: _self_ is given twice", node.loaded->file.string());
        has_self = true;
      }
    }
    if ((!has_self && has_non_override) || defaults.empty()) {
      if (node.primary && has_own && !node.loaded->content.empty())
        note(notes_,
             fmt::format("{}: its defaults list has no _self_: the file's own keys are merged "
                         "after its config groups and override them (Hydra >= 1.1's order); add "
                         "'- _self_' to say where they go",
                         node.loaded->file.string()));
      Entry self;
      self.kind = Entry::Kind::kSelf;
      defaults.push_back(std::move(self));
    }
  }

  // Hydra's _update_overrides: the list's `override` entries register their choices (the first
  // registered wins: the command line, then configs nearer the primary) and must come last.
  void register_overrides(std::vector<Entry>& defaults, const Entry& parent) {
    const Entry* last_override = nullptr;
    for (auto& d : defaults) {
      if (d.is_self()) continue;
      set_parent(d, parent);
      if (d.kind == Entry::Kind::kHydra) continue;  // Hydra's own groups: no order rule here
      if (last_override != nullptr && !d.override_ && !d.appended)
        fail(
            "{} comes after the override entry {}; overrides must be at the end of the defaults "
            "list (as in Hydra)",
            d.where, last_override->text);
      if (!d.override_) continue;
      if (interpolated_ > 0)
        fail(
            "{}: an override entry is not allowed in a config chosen by an interpolation (as in "
            "Hydra: the choices it would change are already made)",
            d.where);
      last_override = &d;
      if (find_choice(d.override_key()) == nullptr)
        choices_.push_back({d.override_key(), d.value, d.where, "", false});
    }
  }

  void expand(Node& node) {
    Entry& e = node.entry;
    const fs::path file = node.primary ? primary_ : file_of(e.config_path());
    const bool missing = e.has_name() && e.name() == std::string(kMissingValue);
    if (node.primary) {
      if (!load(file).content.is_object())
        fail("{}: the top level must be a mapping", file.string());
      if (find_key_path(load(file).content, "hydra.searchpath") != nullptr)
        not_read_ = "; hydra.searchpath is not read: zerotune looks for configs beside " +
                    primary_.filename().string() + " only";
      e.header = load(file).header;
    } else if (e.has_name() && !missing && fs::is_regular_file(file)) {
      e.header = load(file).header;
    }
    if (!node.primary && is_deleted(e)) {
      e.deleted = true;
      return;
    }
    set_known_choice(e);
    if (!e.has_name()) return;  // `group: null`
    if (missing)
      fail(
          "{}: config group '{}' must be chosen on the command line ({}=<option>); available "
          "options in '{}': {}",
          e.where, e.group_path(), e.override_key(), e.group_path(), options_of(e.group_path()));
    if (!fs::is_regular_file(file)) {
      if (e.optional) {
        e.deleted = true;
        return;
      }
      not_found(e, file);
    }
    node.loaded = &load(file);
    if (std::find(chain_.begin(), chain_.end(), file.string()) != chain_.end())
      fail("{}: the defaults lists form a loop: {} -> {}", e.where, join(chain_, " -> "),
           file.string());
    check_depth(e, file);
    chain_.push_back(file.string());
    std::vector<Entry> defaults = node.loaded->defaults;
    if (!defaults.empty() || (node.primary && !appends_.empty())) validate_self(node, defaults);
    if (node.primary && !appends_.empty()) {
      const bool has_self =
          std::any_of(defaults.begin(), defaults.end(), [](const Entry& d) { return d.is_self(); });
      if (!has_self && !node.loaded->content.empty())
        fail(
            "{}: defaults: the list has only override entries and no _self_, so with '{}' Hydra "
            "1.3 would compose the added group alone and drop this file's own keys; add "
            "'- _self_' to the defaults list (first or last, where this file's keys should go)",
            primary_.string(), appends_.front().text);
      defaults.insert(defaults.end(), appends_.begin(), appends_.end());
    }
    register_overrides(defaults, e);
    // Hydra expands the list last entry first, so that an `override` in a later entry's subtree
    // (an experiment config) is registered before the entry it overrides is expanded.
    std::vector<Node> children;
    for (auto d = defaults.rbegin(); d != defaults.rend(); ++d) {
      if (d->override_ || d->kind == Entry::Kind::kHydra) continue;
      if (d->is_self()) {
        Node self;
        self.entry = *d;
        children.push_back(std::move(self));
        continue;
      }
      if (Choice* c = d->is_group() ? find_choice(d->override_key()) : nullptr) {
        d->value = c->value;
        d->chosen_by = c->where;
        c->used = true;
      }
      if (d->is_group() && d->value.is_array()) {  // `group: [a, b]`: one config per option
        for (auto o = d->value.rbegin(); o != d->value.rend(); ++o) {
          Node child;
          child.entry.kind = Entry::Kind::kConfig;
          child.entry.group = d->group + "/" + o->get<std::string>();
          child.entry.package = d->package;
          child.entry.optional = d->optional;
          child.entry.where = d->chosen_by.empty() ? d->where : d->chosen_by;
          set_parent(child.entry, e);
          expand(child);
          children.push_back(std::move(child));
        }
        continue;
      }
      Node child;
      child.entry = *d;
      // `group: ${other}_${x}` names an option by the choices of other groups: expanded once the
      // whole list has been, as Hydra defers it.
      child.deferred = d->is_group() && d->value.is_string() &&
                       d->value.get<std::string>().find("${") != std::string::npos;
      if (!child.deferred) expand(child);
      children.push_back(std::move(child));
    }
    for (Node& child : children) {
      if (!child.deferred) continue;
      child.entry.value = resolve_choice(child.entry);
      ++interpolated_;
      expand(child);
      --interpolated_;
    }
    std::reverse(children.begin(), children.end());
    node.children = std::move(children);
    chain_.pop_back();
  }

  // A config `file` included at depth chain_.size() + 1 (the primary is 1): past
  // kMaxDefaultsDepth, an error naming the entry, the file and the depth (the walk is recursive).
  void check_depth(const Entry& e, const fs::path& file) const {
    if (chain_.size() < static_cast<size_t>(kMaxDefaultsDepth)) return;
    fail(
        "{}: {} is config {} of one chain of defaults lists ({} -> … -> {}); zerotune composes at "
        "most {} nested configs (Hydra 1.3 stops with a RecursionError near 470)",
        e.where, file.string(), chain_.size() + 1, chain_.front(), chain_.back(),
        kMaxDefaultsDepth);
  }

  // The option of `group: ${a}_${b}`: each ${key} is the option chosen for config group key
  // (its override key, "db" or "db@backup"), as Hydra resolves it against its known choices.
  std::string resolve_choice(const Entry& e) const {
    const std::string s = e.value.get<std::string>();
    std::string out;
    size_t i = 0;
    for (size_t open; (open = s.find("${", i)) != std::string::npos;) {
      const size_t close = s.find('}', open);
      if (close == std::string::npos) fail("{}: unterminated '${{' in '{}'", e.where, s);
      const std::string key = s.substr(open + 2, close - open - 2);
      const auto k = known_.find(key);
      if (k == known_.end() || !k->second.value.is_string()) {
        std::vector<std::string> chosen;
        for (const auto& [name, v] : known_)
          if (v.value.is_string()) chosen.push_back(name);
        fail("{}: cannot resolve '${{{}}}': {}; chosen groups: {}", e.where, key,
             k == known_.end() ? "no config group of that name is in the defaults list"
                               : "that group's option is null",
             chosen.empty() ? "none" : join(chosen, ", "));
      }
      out += s.substr(i, open - i) + k->second.value.get<std::string>();
      i = close + 1;
    }
    return out + s.substr(i);
  }

  [[noreturn]] void not_found(const Entry& e, const fs::path& file) const {
    const std::string& where = e.chosen_by.empty() ? e.where : e.chosen_by;
    if (!e.is_group()) fail("{}: there is no config {}{}", where, file.string(), not_read_);
    const std::string group = e.group_path();
    std::error_code ec;
    if (!fs::is_directory(dir_ / group, ec)) {
      const fs::path parent = dir_part(group).empty() ? dir_ : dir_ / dir_part(group);
      const auto groups = config_groups_in(parent);
      fail("{}: there is no config group '{}' (no directory {}); config groups in {}: {}{}", where,
           group, (dir_ / group).string(), parent.empty() ? "." : parent.string(),
           groups.empty() ? "none" : join(groups, ", "), not_read_);
    }
    fail("{}: config group '{}' has no option '{}' (no file {}); available options in '{}': {}{}",
         where, group, e.name(), file.string(), group, options_of(group), not_read_);
  }

  std::string did_you_mean(const std::string& key) {
    const auto it = known_groups_.find(key.substr(0, key.find('@')));
    if (it == known_groups_.end()) return "";
    std::vector<std::string> keys(it->second.begin(), it->second.end());
    keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
    if (keys.empty()) return "";
    return keys.size() == 1 ? "; did you mean " + keys[0] + "?"
                            : "; did you mean one of " + join(keys, ", ") + "?";
  }

  [[noreturn]] void unused_choice(const Choice& c) {
    const std::string hint = did_you_mean(c.key);
    if (c.cli.empty())
      fail("{}: no config group '{}' in the defaults list to override{}", c.where, c.key, hint);
    fail("{}: no config group '{}' in the defaults list{}", c.where, c.key,
         hint.empty() ? fmt::format(" (use +{} to add it)", c.cli) : hint);
  }

  [[noreturn]] void unused_deletion(const Deletion& d) {
    const auto k = known_.find(d.key);
    if (k != known_.end() && !d.value.is_null())
      fail("override '{}': cannot delete config group '{}': its option is {}, not {}", d.text,
           d.key, k->second.value.is_null() ? "null" : k->second.value.get<std::string>(),
           d.value.is_string() ? d.value.get<std::string>() : d.value.dump());
    fail("override '{}': cannot delete config group '{}': it is not in the defaults list{}", d.text,
         d.key, did_you_mean(d.key));
  }

  // Hydra's depth-first walk of the tree into the list of configs to merge, in order.
  void collect(const Node& n, std::vector<Part>& out) const {
    if (!n.children.empty()) {
      for (const Node& c : n.children) {
        if (c.entry.is_self()) {
          out.push_back({n.loaded, n.entry.final_package(), "", n.entry.where});
        } else {
          collect(c, out);
        }
      }
      return;
    }
    const Entry& e = n.entry;
    if (e.deleted || !e.has_name() || n.loaded == nullptr) return;
    out.push_back({n.loaded, e.final_package(), e.is_group() ? e.override_key() : "",
                   e.chosen_by.empty() ? e.where : e.chosen_by});
  }

  fs::path primary_, dir_;
  std::vector<std::string> chain_;  // the files being expanded, primary first
  int interpolated_ = 0;            // > 0: expanding a config chosen by an interpolation
  std::vector<std::string>* notes_;  // compose_hydra_config's `notes` (null: logged)
  std::string not_read_;  // said when a config is not found and the primary sets hydra.searchpath
  std::vector<Choice> choices_;  // in the order they were given
  std::vector<Deletion> deletions_;
  std::vector<Entry> appends_;
  std::map<std::string, Known> known_;                         // override key -> option
  std::map<std::string, std::set<std::string>> known_groups_;  // group path -> override keys
  std::map<std::string, Loaded> cache_;
};

}  // namespace

void merge_config(Json& dst, const Json& src, const std::string& at, const std::string& from) {
  const auto kind = [](const Json& v) { return v.is_array() ? "list" : "mapping"; };
  for (const auto& [k, v] : src.items()) {
    const std::string key = at.empty() ? k : at + "." + k;
    auto it = dst.find(k);
    if (it == dst.end()) {
      dst[k] = v;
    } else if (v.is_string() && v.get<std::string>() == kMissingValue) {
      continue;
    } else if (v.is_object() && it->is_object()) {
      merge_config(*it, v, key, from);
    } else if ((v.is_object() && it->is_array()) || (v.is_array() && it->is_object())) {
      fail(
          "{}: cannot merge '{}': it is a {} here and a {} in the configs merged before it "
          "(OmegaConf merges neither into the other)",
          from, key, kind(v), kind(*it));
    } else {
      *it = v;
    }
  }
}

bool is_config_group(const fs::path& config_dir, const std::string& key_or_group) {
  if (key_or_group.empty()) return false;
  std::error_code ec;
  return fs::is_directory(config_dir / strip_slash(key_or_group), ec);
}

std::vector<std::string> config_groups_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
    const std::string n = f.path().filename().string();
    if (f.is_directory(ec) && n[0] != '.' && n != "__pycache__") out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void note(std::vector<std::string>* notes, std::string line) {
  if (notes != nullptr)
    notes->push_back(std::move(line));
  else
    log::info("{}", line);
}

Json compose_hydra_config(const fs::path& primary, const std::vector<GroupOverride>& overrides,
                          std::vector<NonStringKey>* non_string_keys, KeyOrigins* origins,
                          std::vector<std::string>* notes) {
  // A pipe (`--config <(…)`) or a device: hydra takes the config groups from the primary file's
  // directory, which a pipe has not, and a device may never end.
  if (const std::string_view kind = file_kind(primary); !kind.empty() && kind != "a regular file")
    fail("{}: is {}, not a file; expected a YAML file (its directory holds the config groups)",
         primary.string(), kind);
  return Composer(primary, overrides, notes).compose(non_string_keys, origins);
}

}  // namespace zt
