// The schema of the users' sft.yaml: every key zerotune knows, its default, the values it accepts
// and what zerotune does with it. Complete by construction: every field of TRL's SFTConfig and
// transformers' TrainingArguments (the users' TRL 0.25.1 / transformers 4.57.1 and the current
// TRL 1.16 / transformers 5.x; tests/data/cli/trainer_fields.json, from
// tools/make_config_field_goldens.py) is a `trainer.` key here, and
// tests/cli/test_config_schema.cpp fails when a field of the golden file is missing.
//
// Each key is declared once, here: its path, default, allowed values and use. An acted-on option
// that TrainArgs holds as it is also names its TrainArgs field (cli/train_options.h), and
// make_train_args fills the field from the checked config through it; `zerotune options` prints
// the acted-on keys (README's list, checked by tests/cli/test_options.cpp).
//
// Each key is one of:
//   kActs         acted on (RunConfig → TrainArgs / DataOptions);
//   kNote         accepted; it changes nothing zerotune computes (zerotune already does what it
//                 asks, or it concerns a facility that does not touch the numbers). A value other
//                 than the default gets a one-line note at start-up saying why;
//   kUnsupported  accepted at its default (the value TRL/transformers treat as "off"), refused
//                 otherwise: it would change the results and zerotune lacks it. The note says what.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "io/json.h"

namespace zt::train {
struct TrainArgs;
}

namespace zt::cli {

class RunConfig;

enum class KeyUse { kActs, kNote, kUnsupported };

// compute.zero_stage when neither it nor the accelerate / DeepSpeed config names a stage: plain
// data parallel, as `accelerate launch` without DeepSpeed runs (and DeepSpeed's own
// zero_optimization.stage default).
inline constexpr int kDefaultZeroStage = 0;

// The values a key accepts, checked at start-up for every key present (null = unset is always
// accepted when `nullable`, and for every kNote / kUnsupported key).
struct ValueRule {
  enum class Kind {
    kAny,      // anything
    kBool,     // true / false
    kInt,      // an integer in [lo, hi]
    kNumber,   // a finite number in [lo, hi] (lo_open / hi_open: exclusive)
    kSteps,    // an integer >= lo (1 unless set) or a ratio in (0, 1) of the total steps; a
               // fraction above 1 only where no strategy steps reads it (RunConfig's check)
    kWarmup,   // 0, a ratio in (0, 1), or a whole number of steps >= 1 (transformers 5)
    kString,   // a string
    kEnum,     // one of `choices`; `unsupported` are values TRL knows that zerotune lacks
    kStrings,  // a string or a list of strings (report_to)
  };
  Kind kind = Kind::kAny;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool nullable = false;  // kActs: null is a meaningful value (e.g. max_length: null = no truncation)
  std::vector<std::string_view> choices;
  std::vector<std::string_view> unsupported;
};

struct KeySpec {
  std::string_view path;  // "trainer.learning_rate"
  Json default_value;     // filled in when the key is absent; null = stays unset
  KeyUse use = KeyUse::kActs;
  ValueRule rule;
  std::string_view note;  // kNote: why it changes nothing; kUnsupported: what zerotune lacks
  // An option TrainArgs holds as it is: stores the (checked) value into its field. Empty for keys
  // resolved by hand (make_train_args, data_setup.cpp) and for noted / refused keys.
  std::function<void(const RunConfig&, train::TrainArgs&)> to_args;
  // kUnsupported: values besides the default, null and empty ones that change nothing in TRL
  // either (lr_scheduler_kwargs: "{}", which transformers parses to an empty dict); a string is
  // compared without the whitespace around it.
  std::vector<Json> also_neutral = {};
};

// A field TRL / transformers renamed: the old name is read as the new one (both may not be given
// with different values). `since` says where the rename happened.
struct KeyAlias {
  std::string_view old_path, new_path, since;
};

// Every key, sections first (top level, model, dataset, compute), then trainer.*.
const std::vector<KeySpec>& config_schema();
// The trainer.* part (trainer_keys.cpp).
std::vector<KeySpec> trainer_keys();
const std::vector<KeyAlias>& key_aliases();

const KeySpec* find_key(std::string_view path);
// True when some schema key lies below `path.` (a section such as "dataset.train").
bool is_section(std::string_view path);
// All leaf paths (for "did you mean").
std::vector<std::string_view> schema_paths();
// " (did you mean 'x'?)" for the key path closest to an unknown `path` (closest_match over
// schema_paths()), or "". An old name (key_aliases) is given as its new name, the one to write.
std::string did_you_mean_key(std::string_view path);

// The least number of steps a kSteps rule takes: its `lo` where set (eval_steps / save_steps: 0),
// else 1.
double steps_lower_bound(const ValueRule& rule);

// Checks `value` (not null, not "???") against `rule`; returns "" when it is accepted, else what
// was expected ("a number >= 0", "one of: no, steps, epoch"). An enum value of `unsupported`
// returns "@unsupported" so the caller can word the error as "not supported by zerotune".
std::string check_value(const ValueRule& rule, const Json& value);

// What `rule` accepts, for the list of keys ("one of: no, steps, epoch (not supported: best)",
// "a number >= 0, or null", "any value").
std::string describe_rule(const ValueRule& rule);

// The acted-on keys as a Markdown table (key, default, accepted values): `zerotune options` prints
// it and README.md holds it between `<!-- options:begin -->` and `<!-- options:end -->`.
std::string acted_keys_markdown();

// Fills every TrainArgs field that an option declares (KeySpec::to_args) from `cfg`, and records
// where each such key was set (TrainArgs::key_origins).
void read_declared_options(const RunConfig& cfg, train::TrainArgs& a);

// Table entries: acted on; noted (with why it changes nothing); refused off its default (with
// what zerotune lacks).
KeySpec acts(std::string_view path, Json dflt, ValueRule rule);
KeySpec noted(std::string_view path, Json dflt, std::string_view why, ValueRule rule = {});
KeySpec refused(std::string_view path, Json dflt, std::string_view what,
                std::vector<Json> also_neutral = {});

// Rule builders for the tables.
ValueRule any_value();
ValueRule boolean(bool nullable = false);
ValueRule integer(double lo, double hi = std::numeric_limits<double>::infinity(), bool nullable = false);
ValueRule number(double lo, double hi = std::numeric_limits<double>::infinity(), bool hi_open = false,
                 bool nullable = false);
ValueRule steps(bool nullable = false);
ValueRule warmup();
ValueRule text(bool nullable = false);
ValueRule one_of(std::vector<std::string_view> choices, std::vector<std::string_view> unsupported = {},
                 bool nullable = false);
ValueRule strings();

}  // namespace zt::cli
