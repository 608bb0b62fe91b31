// Which parameters get weight decay: HF Trainer.get_decay_parameter_names (transformers 4.57–5.x).
#pragma once

#include <string_view>

namespace zt::optim {

// True when HF's Trainer puts the parameter `hf_name` (a dotted name from named_parameters(), e.g.
// "model.layers.0.self_attn.q_proj.bias") in the weight-decay group. HF excludes a parameter when
// its lower-cased full name matches any of: "bias", "layernorm", "rmsnorm", a dotted component that
// is exactly "norm" (regex (?:^|\.)norm(?:$|\.)), or "_norm" at the end of a component
// (_norm(?:$|\.)). So q/k/v biases, input_layernorm / post_attention_layernorm and model.norm
// weights get no decay; embeddings, projections and lm_head do. HF also excludes parameters of
// nn.LayerNorm modules whatever their name; Qwen2 and Llama have none (their norms are RMSNorm
// classes, caught by name), so the name is all this needs. Shapes play no part in HF's rule.
bool hf_weight_decay_applies(std::string_view hf_name);

}  // namespace zt::optim
