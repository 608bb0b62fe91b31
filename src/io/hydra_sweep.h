// Hydra's sweep overrides (its override grammar, Hydra 1.3): the forms `python sft.py` runs as
// several jobs under --multirun and refuses without it ("Ambiguous value for argument …" /
// "Sweep parameters … requires --multirun"). zerotune runs one job per command, so they are
// refused with one message that names the override.
#pragma once

#include <string>
#include <string_view>

namespace zt {

// The message of every refused sweep: the override, or the flag (-m), is named before it.
inline constexpr std::string_view kSweepRefused =
    "sweeps (Hydra --multirun) are not supported: launch one run per value";

// Whether `value` (an override's text after its first '=') is a sweep in Hydra's grammar:
//   - a comma at the top level: not quoted ('a,b', "a,b"), not escaped (a\,b), not inside
//     [..], {..} (so ${oc.env:X,d} neither) or a function's (..): `1e-5,2e-5`, `mysql,postgres`;
//   - a sweep function: choice(..), range(..), interval(..), glob(..), tag(..);
//   - sort / shuffle / str / int / float / bool of several values (`sort(a,b)`) or of a sweep
//     (`shuffle(range(1,3))`).
// Values, as in Hydra: `[a,b]`, `{a: 1, b: 2}`, `sort([b,a])`, `str(1)`, `"choice(a,b)"`, `choice`.
// Checked against Hydra 1.3.2 (each form above, with and without --multirun).
bool is_sweep_value(std::string_view value);

// Throws zt::Error "override '<ov>': sweeps (Hydra --multirun) are not supported: launch one run
// per value" (with how to write a list or a string holding a comma, for the comma form) when `ov`
// is a sweep (is_sweep_value of its value), chooses or configures Hydra's sweeper
// (`hydra/sweeper=optuna`, `hydra.sweeper.params.x=…`; Hydra reads them only under --multirun) or
// asks for multirun (`hydra.mode=MULTIRUN`, Hydra's equivalent of -m). Otherwise does nothing.
void refuse_sweep_override(const std::string& ov);

}  // namespace zt
