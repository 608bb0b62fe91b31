// transformers' dict-valued TrainingArguments fields given as a string (`lr_scheduler_kwargs:
// '{"min_lr": 1e-6}'` in a YAML config, a dict on a command line): how transformers 4.57.1's
// TrainingArguments.__post_init__ reads them (training_args.py, the loop over _VALID_DICT_FIELDS:
// accelerator_config, fsdp_config, deepspeed, gradient_checkpointing_kwargs, lr_scheduler_kwargs).
#pragma once

#include "io/json.h"

namespace zt::cli {

// transformers' _convert_str_dict: in the mapping `dict` (nested mappings too, not lists), a string
// value "true" / "false" in any case becomes that bool; one of ASCII digits only ("007")
// int(value); one whose digits hold a single '.' ("0.5", ".5", "5.") float(value); any other
// string ("1e-6", "-3", " 5") stays a string. Throws zt::Error naming the key path for a digit
// string beyond int64 (Python's int has no bound). Python's str.isdigit also takes non-ASCII
// digits, which int() reads ("٣" is 3; "²" fails there): zerotune leaves such a string as it is.
Json convert_str_dict(Json dict);

// The value of a dict field as TrainingArguments.__post_init__ leaves it: a string that starts
// with '{' (no whitespace before it) is json.loads'ed (Python's json: duplicate keys keep the last
// value; NaN / Infinity, which it also takes, are refused) and its values converted by
// convert_str_dict; any other value, a string not starting with '{' included, is returned as it is.
// Throws zt::Error with json.loads' complaint for a string that starts with '{' and is not one JSON
// object (transformers raises JSONDecodeError there); the caller names the file, line and key.
Json hf_dict_field_value(const Json& value);

}  // namespace zt::cli
