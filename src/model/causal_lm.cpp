// CausalLM: pool planning, forward and backward. Parameter I/O is in model_weights.cpp.
#include "model/causal_lm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>

#include "core/dtype.h"
#include "core/error.h"

namespace zt {

namespace {

// Where the layers' lent gradient memory is handed out, in layer order: layer `layer`'s memory,
// from `next` (nullptr: its start).
struct LentCursor {
  int64_t layer = 0;
  char* next = nullptr;
};

// Places `bytes` (256-byte aligned) at the cursor in the lent memory of layers 0 … `last`
// (lb[l], le[l]: layer l's [begin, end), nullptr where nothing is lent). An item may run on from
// one layer's memory into the next one's where the two are adjacent. Returns nullptr when it does
// not fit before the end of layer `last`'s memory (a later item, with a later limit, may still
// fit); the cursor then stays, or has moved past a gap or an unlent layer it crossed (space no
// later item could use either: the cursor only moves forward).
void* place_in_lent(const std::vector<char*>& lb, const std::vector<char*>& le, LentCursor& at,
                    size_t bytes, int64_t last) {
  const auto L = static_cast<int64_t>(lb.size());
  while (at.layer <= last && at.layer < L) {
    const auto c = static_cast<size_t>(at.layer);
    if (lb[c] == nullptr) {  // nothing lent here: on to the next layer's memory
      ++at.layer;
      at.next = nullptr;
      continue;
    }
    char* cur = at.next != nullptr ? at.next : lb[c];
    auto* a = reinterpret_cast<char*>(align_up(reinterpret_cast<uintptr_t>(cur), 256));
    char* end = a + bytes;
    auto e = c;  // the item may run on into the next layers' memory where it follows on
    while (end > le[e] && static_cast<int64_t>(e) < last && e + 1 < lb.size() && lb[e + 1] == le[e])
      ++e;
    if (end <= le[e]) {
      at.layer = static_cast<int64_t>(e);
      at.next = end;
      return a;
    }
    // Stopped by the limit: the item does not fit (a later, later-read item may).
    if (static_cast<int64_t>(e) >= last || e + 1 >= lb.size()) return nullptr;
    ++e;  // stopped by a gap: start again at the next layer's memory
    at.layer = static_cast<int64_t>(e);
    at.next = nullptr;
  }
  return nullptr;
}
constexpr DType kF32 = DType::kF32;
constexpr DType kI32 = DType::kI32;

// A view of `p` (nullptr stays nullptr) with a parameter's HF shape.
Tensor shaped(const void* p, DType dt, const std::vector<int64_t>& shape, Device dev) {
  Tensor t(const_cast<void*>(p), dt, {}, dev);
  t.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < t.ndim; ++d) t.shape[d] = shape[static_cast<size_t>(d)];
  return t;
}
}  // namespace

CausalLM::CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options)
    : CausalLM(std::move(cfg), ops, memory, options, nullptr) {}

CausalLM::CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options,
                   GroupStorage& storage)
    : CausalLM(std::move(cfg), ops, memory, options, &storage) {}

CausalLM::CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options,
                   GroupStorage* storage)
    : cfg_(std::move(cfg)),
      layout_(cfg_),
      ops_(ops),
      opt_(options),
      acts_("activations", memory),
      ws_("workspace", memory),
      inputs_("inputs", memory),
      storage_(storage) {
  if (opt_.dtype != DType::kF32 && opt_.dtype != DType::kBF16)
    fail("model: dtype {} is not supported (f32 or bf16)", dtype_name(opt_.dtype));
  if (opt_.max_tokens < 1) fail("model: max_tokens must be >= 1 (got {})", opt_.max_tokens);
  if (opt_.max_seqlen == 0) opt_.max_seqlen = opt_.max_tokens;
  if (opt_.max_seqlen < 1 || opt_.max_seqlen > opt_.max_tokens)
    fail("model: max_seqlen {} must be in [1, max_tokens = {}]", opt_.max_seqlen, opt_.max_tokens);
  if (cfg_.head_dim % 2 != 0) fail("model: head_dim {} of {} is odd", cfg_.head_dim, cfg_.source);
  // A config built in code may leave the layer choices at their zero values: Llama's then.
  const auto L = static_cast<size_t>(cfg_.num_hidden_layers);
  if (cfg_.attention_scale <= 0.0)
    cfg_.attention_scale = 1.0 / std::sqrt(static_cast<double>(cfg_.head_dim));
  if (cfg_.rotary_dim == 0) cfg_.rotary_dim = cfg_.head_dim;
  if (cfg_.rotary_dim % 2 != 0 || cfg_.rotary_dim < 2 || cfg_.rotary_dim > cfg_.head_dim)
    fail("model: rotary_dim {} of {} must be even and in [2, head_dim {}]", cfg_.rotary_dim,
         cfg_.source, cfg_.head_dim);
  if (cfg_.layer_window.empty()) cfg_.layer_window.assign(L, 0);
  if (cfg_.layer_rope.empty()) cfg_.layer_rope.assign(L, 0);
  // A config whose layer count was changed in code (tests, benchmarks) repeats its per-layer
  // pattern, as HF's sliding_window_pattern does.
  const auto repeat = [L](auto& v) {
    const auto n = v.size();
    v.resize(L);
    for (size_t l = n; l < L; ++l) v[l] = v[l % n];
  };
  repeat(cfg_.layer_window);
  repeat(cfg_.layer_rope);
  for (int8_t r : cfg_.layer_rope) uses_local_rope_ = uses_local_rope_ || r == 1;
  plan_and_allocate(memory);
}

void CausalLM::plan_and_allocate(MemoryResource& memory) {
  const int64_t T = opt_.max_tokens, H = cfg_.hidden_size, I = cfg_.intermediate_size;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = cfg_.head_dim;
  const int64_t V = cfg_.vocab_size, L = cfg_.num_hidden_layers;
  const DType dt = opt_.dtype;
  const size_t es = dtype_size(dt);
  const auto n = [](int64_t elems, size_t size) { return static_cast<size_t>(elems) * size; };
  const auto shape = [](DType d, std::initializer_list<int64_t> s) {  // shape-only tensors
    return Tensor(nullptr, d, s);
  };

  // Activations. The residual stream x.l (l >= 1: written by layer l - 1, read by layer l's
  // backward, or the final norm's for l = L) goes into gradient memory the storage lends
  // (GroupStorage::gradient_scratch): a layer group's fp32 gradient columns are dead from the
  // start of forward_backward until that layer's backward writes them, so anything whose last
  // read is in the backward of layer l may live in the lent memory of layers 0 … l - 1 (never
  // layer l's own: its MLP weight gradients are written before its attention backward). Under
  // checkpointing layer l's attention output and lse follow x.l where they fit without costing a
  // later residual its place: the recomputation before layer l's backward then skips the
  // attention forward, as keep_attention does, for no memory (attention_in_gradient_memory()).
  // For Qwen2.5-1.5B at 8k tokens 28 × 25 MB of residuals and 27 × 25.6 MB of attention outputs.
  std::vector<void*> x_in_grads(static_cast<size_t>(L) + 1, nullptr);
  std::vector<void*> att_in_grads(static_cast<size_t>(L), nullptr);
  if (opt_.share_activation_memory && storage_ != nullptr) {
    std::vector<char*> lb(static_cast<size_t>(L), nullptr), le(static_cast<size_t>(L), nullptr);
    for (int64_t l = 0; l < L; ++l) {
      const int g = ParamLayout::group_of_layer(static_cast<int>(l));
      auto* p = static_cast<char*>(storage_->gradient_scratch(g));
      if (p == nullptr) continue;
      lb[static_cast<size_t>(l)] = p;
      le[static_cast<size_t>(l)] = p + n(layout_.group_end(g) - layout_.group_begin(g), 4);
    }
    const bool lend_att = opt_.checkpointing;
    const size_t x_bytes = n(T * H, es);
    const size_t att_bytes = align_up(n(T * Hq * D, es), 256) + n(Hq * T, 4);  // att, then lse
    // Residuals x.l0 … x.L placed from cursor c alone (a dry run: how many fit).
    const auto residuals_from = [&](LentCursor c, int64_t l0) {
      int count = 0;
      for (int64_t l = l0; l <= L; ++l)
        count += place_in_lent(lb, le, c, x_bytes, l - 1) != nullptr;
      return count;
    };
    // Residuals come first: a lent att.l saves memory only where the layer set's own buffer
    // would otherwise be needed (never, under plain checkpointing), a lent x.l saves T·H·dtype
    // bytes. So att.l is placed only when the residuals after it still fit as many as they would
    // without any att (when H > Hq·D and a layer's memory is short, e.g. Gemma 3, it may not).
    const int residuals_alone = residuals_from(LentCursor{}, 1);
    LentCursor cursor;
    for (int64_t l = 1; l <= L; ++l) {
      x_in_grads[static_cast<size_t>(l)] = place_in_lent(lb, le, cursor, x_bytes, l - 1);
      if (x_in_grads[static_cast<size_t>(l)] != nullptr) ++residuals_in_grads_;
      if (lend_att && l < L) {
        LentCursor c = cursor;
        void* p = place_in_lent(lb, le, c, att_bytes, l - 1);
        if (p != nullptr && residuals_in_grads_ + residuals_from(c, l + 1) >= residuals_alone) {
          att_in_grads[static_cast<size_t>(l)] = p;
          cursor = c;
          ++att_in_grads_;
        }
      }
    }
  }
  std::vector<Arena::Slot> s_xs;
  for (int64_t l = 0; l <= L; ++l)
    s_xs.push_back(acts_.reserve(fmt::format("x.{}", l),
                                 x_in_grads[static_cast<size_t>(l)] ? 0 : n(T * H, es)));
  const int64_t nsets = opt_.checkpointing ? 1 : L;
  // keep_attention: att / lse per layer below, for the layers the lent memory did not take; the
  // layer set keeps its own for the others' recomputation and for forward() (eval), which must
  // not write lent memory — none when every layer keeps them in activation memory.
  const bool keep = opt_.checkpointing && opt_.keep_attention;
  const bool set_att = !keep || att_in_grads_ > 0;
  // Optional per-layer buffers are reserved with 0 bytes (and get a null pointer) when the
  // layer has no parameter that uses them: the layout's norms decide, as in layer_forward.
  const LayerIds& l0 = layout_.layer(0);
  const bool qkn = l0.q_norm >= 0;
  const bool per_head = cfg_.qk_norm == QkNorm::kPerHead;
  const bool attn_in = l0.attn_in_norm >= 0, mlp_in = l0.mlp_in_norm >= 0;
  const bool attn_post = l0.attn_out_norm >= 0, mlp_post = l0.mlp_out_norm >= 0;
  const int64_t rq = per_head ? T * Hq : T, rk = per_head ? T * Hkv : T;  // q/k norm rows
  // The attention's gradient buffers and workspace inside each layer's MLP activations (gate, up,
  // act: reserved one after the other, so contiguous) when they fit: saves their own pools, for
  // Qwen2.5-1.5B 25 KB a token (dK/dV partials, the dQ accumulator, d.att, d.q, d.k, d.v) out of
  // the 53 KB a token the three MLP buffers hold.
  Varlen probe;
  probe.max_seqlen = opt_.max_seqlen;
  attn_ws_bytes_ =
      ops_.attention_workspace_bytes(shape(dt, {T, Hq, D}), shape(dt, {T, Hkv, D}), probe);
  {
    const auto a256 = [](size_t b) { return align_up(b, 256); };
    off_dq_ = a256(n(T * Hq * D, es));
    off_dk_ = off_dq_ + a256(n(T * Hq * D, es));
    off_dv_ = off_dk_ + a256(n(T * Hkv * D, es));
    off_aws_ = off_dv_ + a256(n(T * Hkv * D, es));
    const size_t mlp = 2 * align_up(n(T * I, es), Arena::kAlignment) + n(T * I, es);
    attn_in_mlp_ = opt_.share_activation_memory &&
                   255 + off_aws_ + attn_ws_bytes_ <= mlp;  // 255: the base rounded up to 256 B
  }
  // Workspace: the largest any op of a step asks for, from shape-only tensors.
  size_t ws = 0;
  // The calls as linear / linear_backward make them: the output and an input gradient of the
  // compute dtype are only written (beta 0: on the GPU no fp32 copy of a bf16 result, for the
  // MLP's [T, I] 4·T·I bytes), the summed input gradient (dh_acc, fp32) and the weight gradient
  // (fp32) are accumulated into.
  const auto linear_ws = [&](int64_t out, int64_t in) {
    const Tensor x = shape(dt, {T, in}), y = shape(dt, {T, out}), w = shape(dt, {out, in});
    ws = std::max(ws, ops_.matmul_workspace_bytes(y, x, Trans::kN, w, Trans::kT, false));
    ws = std::max(ws, ops_.matmul_workspace_bytes(x, y, Trans::kN, w, Trans::kN, false));
    ws =
        std::max(ws, ops_.matmul_workspace_bytes(shape(kF32, {T, in}), y, Trans::kN, w, Trans::kN));
    ws = std::max(ws,
                  ops_.matmul_workspace_bytes(shape(kF32, {out, in}), y, Trans::kT, x, Trans::kN));
  };
  linear_ws(Hq * D, H);
  linear_ws(Hkv * D, H);
  linear_ws(H, Hq * D);
  linear_ws(I, H);
  linear_ws(H, I);
  ws = std::max(
      ws, ops_.matmul_workspace_bytes(shape(kF32, {kLogitRows, V}), shape(dt, {kLogitRows, H}),
                                      Trans::kN, shape(dt, {V, H}), Trans::kT));
  if (!attn_in_mlp_) ws = std::max(ws, attn_ws_bytes_);
  ws = std::max(ws, ops_.embedding_workspace_bytes(shape(kI32, {T})));
  // The fused LM-head cross-entropy's workspace. Under gradient checkpointing the one layer
  // activation set is dead while it runs (the backward recomputes every layer into it, the last
  // one included), so the cross-entropy borrows the set (for Qwen2.5-1.5B 73 KiB a token, the
  // workspace ~0.58 GB at the default budget), extended by the bytes it lacks (ce_overhang_, reserved
  // right after the set so the two are contiguous) when that costs less than the workspace pool
  // growing to hold the cross-entropy's own buffer. Only where it lives depends on this, not its
  // chunking: the same bits either way.
  const size_t ce_ws =
      ops_.linear_cross_entropy_workspace_bytes(shape(dt, {T, H}), shape(dt, {V, H}));
  std::vector<std::array<Arena::Slot, kLayerActs>> s_layers;
  const size_t sets_begin = acts_.planned_bytes();  // the first set's bytes: [begin, end)
  size_t set0_end = sets_begin;
  for (int64_t l = 0; l < nsets; ++l) {
    const std::string p = fmt::format("layer.{}.", l);
    s_layers.push_back({
        acts_.reserve(p + "ln1", attn_in ? n(T * H, es) : 0),
        acts_.reserve(p + "rstd1", attn_in ? n(T, 4) : 0),
        acts_.reserve(p + "q", n(T * Hq * D, es)),
        acts_.reserve(p + "k", n(T * Hkv * D, es)),
        acts_.reserve(p + "v", n(T * Hkv * D, es)),
        acts_.reserve(p + "att", set_att ? n(T * Hq * D, es) : 0),
        acts_.reserve(p + "lse", set_att ? n(Hq * T, 4) : 0),
        acts_.reserve(p + "xmid", n(T * H, es)),
        acts_.reserve(p + "ln2", mlp_in ? n(T * H, es) : 0),
        acts_.reserve(p + "rstd2", mlp_in ? n(T, 4) : 0),
        acts_.reserve(p + "gate", n(T * I, es)),
        acts_.reserve(p + "up", n(T * I, es)),
        acts_.reserve(p + "act", n(T * I, es)),
        acts_.reserve(p + "q_raw", qkn ? n(T * Hq * D, es) : 0),
        acts_.reserve(p + "k_raw", qkn ? n(T * Hkv * D, es) : 0),
        acts_.reserve(p + "rstd_q", qkn ? n(rq, 4) : 0),
        acts_.reserve(p + "rstd_k", qkn ? n(rk, 4) : 0),
        acts_.reserve(p + "attn_out", attn_post ? n(T * H, es) : 0),
        acts_.reserve(p + "rstd_attn_out", attn_post ? n(T, 4) : 0),
        acts_.reserve(p + "mlp_out", mlp_post ? n(T * H, es) : 0),
        acts_.reserve(p + "rstd_mlp_out", mlp_post ? n(T, 4) : 0),
    });
    if (l == 0) set0_end = acts_.planned_bytes();
  }
  const size_t set0_bytes = set0_end - align_up(sets_begin, Arena::kAlignment);
  if (opt_.share_activation_memory && opt_.checkpointing) {
    // + kAlignment: slack in case the overhang's slot starts past the set's end (the arena
    // aligns every slot; the set's end is aligned today, so it starts right there).
    ce_overhang_ = ce_ws > set0_bytes ? ce_ws - set0_bytes + Arena::kAlignment : 0;
    ce_in_layer_set_ = ce_overhang_ == 0 || ce_overhang_ < (ce_ws > ws ? ce_ws - ws : 0);
  }
  acts_.reserve("layer.0 (cross-entropy overhang)", ce_in_layer_set_ ? ce_overhang_ : 0);
  // Selective checkpointing: the attention output and softmax statistics of each layer the lent
  // memory did not take.
  std::vector<std::pair<Arena::Slot, Arena::Slot>> s_kept;
  for (int64_t l = 0; keep && l < L; ++l) {
    const bool own = att_in_grads[static_cast<size_t>(l)] == nullptr;
    s_kept.emplace_back(
        acts_.reserve(fmt::format("layer.{}.att (kept)", l), own ? n(T * Hq * D, es) : 0),
        acts_.reserve(fmt::format("layer.{}.lse (kept)", l), own ? n(Hq * T, 4) : 0));
  }
  // The pad row's gradient saved around the embedding backward (HF padding_idx).
  if (!cfg_.pad_token_id.empty() && cfg_.pad_token_id.front() >= 0 && cfg_.pad_token_id.front() < V)
    pad_row_ = cfg_.pad_token_id.front();
  const Arena::Slot s_pad = acts_.reserve("embed.pad_row", pad_row_ >= 0 ? n(H, 4) : 0);
  const Arena::Slot s_lnf = acts_.reserve("lnf", n(T * H, es)),
                    s_rstdf = acts_.reserve("rstdf", n(T, 4));
  const Arena::Slot s_tmp = acts_.reserve("tmp", n(T * H, es));
  const int64_t R2 = cfg_.rotary_dim / 2;  // rotated pairs of a head
  const Arena::Slot s_cos = acts_.reserve("rope.cos", n(T * R2, 4));
  const Arena::Slot s_sin = acts_.reserve("rope.sin", n(T * R2, 4));
  const Arena::Slot s_cosl = acts_.reserve("rope_local.cos", uses_local_rope_ ? n(T * R2, 4) : 0);
  const Arena::Slot s_sinl = acts_.reserve("rope_local.sin", uses_local_rope_ ? n(T * R2, 4) : 0);
  const Arena::Slot s_dres = acts_.reserve("d.residual", n(T * H, es));
  const Arena::Slot s_dh = acts_.reserve("d.hidden", n(T * H, es));
  // fp32 sum of the q/k/v (and gate/up) input gradients when the compute dtype is bf16, rounded
  // once into d.hidden (HF rounds each partial to bf16 and adds in bf16; one rounding is closer to
  // fp32 and lets the GPU accumulate in the GEMM epilogue).
  const Arena::Slot s_dh32 = acts_.reserve("d.hidden.f32", dt == kF32 ? 0 : n(T * H, 4));
  const size_t dbytes = attn_in_mlp_ ? 0 : 1;  // the dedicated buffers: none when carved
  const Arena::Slot s_datt = acts_.reserve("d.att", dbytes * n(T * Hq * D, es));
  const Arena::Slot s_dq = acts_.reserve("d.q", dbytes * n(T * Hq * D, es));
  const Arena::Slot s_dk = acts_.reserve("d.k", dbytes * n(T * Hkv * D, es));
  const Arena::Slot s_dv = acts_.reserve("d.v", dbytes * n(T * Hkv * D, es));
  const Arena::Slot s_logits = acts_.reserve("logits", n(kLogitRows * V, 4));

  // Inputs.
  const Arena::Slot s_tok = inputs_.reserve("tokens", n(T, 4)),
                    s_pos = inputs_.reserve("position_ids", n(T, 4));
  const Arena::Slot s_tgt = inputs_.reserve("targets", n(T, 4)),
                    s_cu = inputs_.reserve("cu_seqlens", n(T + 1, 4));
  // inv_freq tables: the global RoPE's, its longrope long-factor variant, the local RoPE's.
  const Arena::Slot s_inv = inputs_.reserve("inv_freq", n(3 * R2, 4));

  if (!ce_in_layer_set_) ws = std::max(ws, ce_ws);
  ws = std::max<size_t>(ws, 1);  // every workspace buffer may be shared away: keep a valid view
  const Arena::Slot s_ws = ws_.reserve("ops", ws);

  if (storage_ == nullptr) {  // the model's own parameters
    own_ = std::make_unique<OwnedStorage>(layout_, dt, ops_, memory, stream_);
    storage_ = own_.get();
  }
  acts_.allocate();
  ws_.allocate();
  inputs_.allocate();
  device_ = acts_.device();
  const auto G = static_cast<size_t>(layout_.num_groups());
  wbase_.assign(G, nullptr);
  gbase_.assign(G, nullptr);
  if (own_)  // fixed pointers: the views stay valid between passes
    for (size_t g = 0; g < G; ++g) {
      wbase_[g] = static_cast<const char*>(own_->weight_base(static_cast<int>(g)));
      gbase_[g] = own_->grad_base(static_cast<int>(g));
    }

  for (int64_t l = 0; l <= L; ++l) {
    void* p = x_in_grads[static_cast<size_t>(l)];
    xs_.push_back(p != nullptr ? p : acts_.ptr(s_xs[static_cast<size_t>(l)]));
  }
  for (const auto& s : s_layers) {
    LayerActs a;
    void** f[] = {&a.ln1,   &a.rstd1,  &a.q,      &a.k,        &a.v,       &a.att,     &a.lse,
                  &a.xmid,  &a.ln2,    &a.rstd2,  &a.gate,     &a.up,      &a.act,     &a.q_raw,
                  &a.k_raw, &a.rstd_q, &a.rstd_k, &a.attn_out, &a.rstd_ao, &a.mlp_out, &a.rstd_mo};
    static_assert(std::size(f) == kLayerActs);
    for (size_t i = 0; i < s.size(); ++i) *f[i] = ptr_or_null(s[i]);
    layer_acts_.push_back(a);
  }
  // Per layer: its kept att / lse in lent memory (then kept_lent_), in activation memory
  // (keep_attention), or none.
  if (keep || att_in_grads_ > 0) {
    kept_att_.assign(static_cast<size_t>(L), nullptr);
    kept_lse_.assign(static_cast<size_t>(L), nullptr);
    kept_lent_.assign(static_cast<size_t>(L), false);
  }
  for (size_t l = 0; l < s_kept.size(); ++l) {
    kept_att_[l] = ptr_or_null(s_kept[l].first);
    kept_lse_[l] = ptr_or_null(s_kept[l].second);
  }
  for (size_t l = 0; l < att_in_grads.size(); ++l)
    if (auto* p = static_cast<char*>(att_in_grads[l]); p != nullptr) {
      kept_att_[l] = p;
      kept_lse_[l] = p + align_up(n(T * Hq * D, es), 256);
      kept_lent_[l] = true;
    }
  pad_save_ = ptr_or_null(s_pad);
  lnf_ = acts_.ptr(s_lnf);
  rstdf_ = acts_.ptr(s_rstdf);
  tmp_ = acts_.ptr(s_tmp);
  cos_ = acts_.ptr(s_cos);
  sin_ = acts_.ptr(s_sin);
  cosl_ = ptr_or_null(s_cosl);
  sinl_ = ptr_or_null(s_sinl);
  dres_ = acts_.ptr(s_dres);
  xs_eval_ = xs_;
  if (residuals_in_grads_ > 0)
    for (size_t l = 0; l < xs_eval_.size(); ++l) xs_eval_[l] = l % 2 == 0 ? xs_[0] : dres_;
  dh_ = acts_.ptr(s_dh);
  dh32_ = dt == kF32 ? dh_ : acts_.ptr(s_dh32);
  datt_ = acts_.ptr(s_datt);
  dq_ = acts_.ptr(s_dq);
  dk_ = acts_.ptr(s_dk);
  dv_ = acts_.ptr(s_dv);
  logits_buf_ = acts_.ptr(s_logits);
  tokens_ = inputs_.ptr(s_tok);
  pos_ = inputs_.ptr(s_pos);
  targets_ = inputs_.ptr(s_tgt);
  cu_ = inputs_.ptr(s_cu);
  inv_freq_ = inputs_.ptr(s_inv);
  workspace_ = ws_.view(s_ws, DType::kU8, {static_cast<int64_t>(std::max<size_t>(ws, 1))});
  ce_workspace_ =
      ce_in_layer_set_
          ? Tensor(static_cast<char*>(acts_.base()) + align_up(sets_begin, Arena::kAlignment),
                   DType::kU8, {static_cast<int64_t>(std::max(set0_bytes, ce_ws))},
                   acts_.device())
          : workspace_;

  // Rows of the inv_freq input: 0 the global RoPE (short factors for longrope), 1 its long
  // factors (longrope), 2 the local RoPE (Gemma 3's sliding layers).
  std::vector<float> inv(static_cast<size_t>(3 * R2), 0.0f);
  const auto put = [&](int row, const std::vector<float>& f) {
    if (static_cast<int64_t>(f.size()) != R2)
      fail("model: rope_inv_freq gave {} values for rotary_dim {}", f.size(), cfg_.rotary_dim);
    std::copy(f.begin(), f.end(), inv.begin() + row * R2);
  };
  put(0, rope_inv_freq(cfg_.rope, cfg_.rotary_dim, false));
  if (cfg_.rope.type == RopeType::kLongrope)
    put(1, rope_inv_freq(cfg_.rope, cfg_.rotary_dim, true));
  if (uses_local_rope_) put(2, rope_inv_freq(cfg_.rope_local, cfg_.rotary_dim, false));
  ops_.copy_from_host(Tensor(inv_freq_, kF32, {3 * R2}, inputs_.device()), inv.data(), stream_);
  // Gemma's embedding scale, rounded to the compute dtype (HF `embed_scale.to(weight.dtype)`).
  embed_scale_ = static_cast<float>(cfg_.embed_scale);
  if (dt == DType::kBF16) embed_scale_ = bf16_to_f32(f32_to_bf16(embed_scale_));
  targets_host_.resize(static_cast<size_t>(T));
  cu_host_.reserve(static_cast<size_t>(T) + 1);
}

void* CausalLM::ptr_or_null(Arena::Slot slot) const {
  return acts_.bytes(slot) == 0 ? nullptr : acts_.ptr(slot);
}

CausalLM::AttnBufs CausalLM::attn_bufs(const LayerActs& a) const {
  if (!attn_in_mlp_) return {datt_, dq_, dk_, dv_, workspace_};
  const auto g = reinterpret_cast<uintptr_t>(a.gate);
  char* base = static_cast<char*>(a.gate) + ((256 - (g & 255u)) & 255u);
  return {base, base + off_dq_, base + off_dk_, base + off_dv_,
          Tensor(base + off_aws_, DType::kU8,
                 {static_cast<int64_t>(std::max<size_t>(attn_ws_bytes_, 1))}, acts_.device())};
}

ModelMemory CausalLM::memory() const {
  return {own_ ? own_->weight_bytes() : 0, own_ ? own_->grad_bytes() : 0, acts_.planned_bytes(),
          ws_.planned_bytes(), inputs_.planned_bytes()};
}

Tensor CausalLM::act(void* p, std::initializer_list<int64_t> shape, DType dt) const {
  return Tensor(p, dt, shape, acts_.device());
}

Tensor CausalLM::param(int i) const {
  const ParamSpec& s = layout_.param(i);
  const char* b = wbase_[static_cast<size_t>(s.group)];
  const size_t off = static_cast<size_t>(s.offset - layout_.group_begin(s.group));
  return shaped(b == nullptr ? nullptr : b + off * dtype_size(opt_.dtype), opt_.dtype, s.shape,
                device_);
}

Tensor CausalLM::flat_param(const Tensor& flat, int i) const {
  const ParamSpec& s = layout_.param(i);
  return shaped(
      static_cast<const char*>(flat.data) + static_cast<size_t>(s.offset) * dtype_size(opt_.dtype),
      opt_.dtype, s.shape, flat.device);
}

Tensor CausalLM::grad(int i) const {
  const ParamSpec& s = layout_.param(i);
  const float* b = gbase_[static_cast<size_t>(s.group)];
  return shaped(b == nullptr ? nullptr : b + (s.offset - layout_.group_begin(s.group)), kF32,
                s.shape, device_);
}

OwnedStorage& CausalLM::own(const char* what) const {
  if (!own_)
    fail("model: {} needs the model's own storage (this model uses a caller's GroupStorage)", what);
  return *own_;
}

Tensor CausalLM::group_weights(int g) const {
  const int64_t b = layout_.group_begin(g), e = layout_.group_end(g);
  return Tensor(own("group_weights()").weight_base(g), opt_.dtype, {e - b}, device_);
}

Tensor CausalLM::group_grads(int g) const {
  const int64_t b = layout_.group_begin(g), e = layout_.group_end(g);
  return Tensor(own("group_grads()").grad_base(g), kF32, {e - b}, device_);
}

Tensor CausalLM::all_weights() const { return own("all_weights()").all_weights(); }

Tensor CausalLM::all_grads() const { return own("all_grads()").all_grads(); }

void CausalLM::zero_grads() { ops_.zero(own("zero_grads()").all_grads(), stream_); }

std::string CausalLM::group_name(int g) const {
  if (g < 0 || g >= layout_.num_groups())
    fail("model: group {} is outside [0, {})", g, layout_.num_groups());
  if (g == 0) return "model.embed_tokens";
  if (g == layout_.group_head()) return layout_.tied() ? "model.norm" : "model.norm + lm_head";
  return fmt::format("model.layers.{}", g - 1);
}

void CausalLM::acquire(int g) {
  const void* w = storage_->weights(g);  // ZeRO-3: all-gathers group g (collective)
  if (w == nullptr) fail("model: group {} ({}): the storage gave no weights", g, group_name(g));
  wbase_[static_cast<size_t>(g)] = static_cast<const char*>(w);
}

void CausalLM::release(int g) {
  storage_->release(g);
  if (!own_) wbase_[static_cast<size_t>(g)] = nullptr;
}

void CausalLM::take_grads(int g) {
  float* p = storage_->grads(g);
  if (p == nullptr)
    fail("model: group {} ({}): the storage gave no gradient buffer", g, group_name(g));
  gbase_[static_cast<size_t>(g)] = p;
}

void CausalLM::grads_ready(int g) {
  storage_->grads_ready(g);  // the ZeRO engine reduce-scatters group g (collective)
  if (!own_) gbase_[static_cast<size_t>(g)] = nullptr;
}

Tensor CausalLM::residual(int l, int64_t T) const {
  return act(xs_[static_cast<size_t>(l)], {T, cfg_.hidden_size}, opt_.dtype);
}

int64_t CausalLM::stage_inputs(const MicroBatch& mb) {
  validate_micro_batch(mb, cfg_.vocab_size, opt_.max_tokens, opt_.max_seqlen);
  const int64_t T = mb.num_tokens();
  shift_targets(mb, std::span<int32_t>(targets_host_.data(), static_cast<size_t>(T)));
  const Device dev = inputs_.device();
  ops_.copy_from_host(Tensor(tokens_, kI32, {T}, dev), mb.tokens.data(), stream_);
  ops_.copy_from_host(Tensor(pos_, kI32, {T}, dev), mb.position_ids.data(), stream_);
  ops_.copy_from_host(Tensor(targets_, kI32, {T}, dev), targets_host_.data(), stream_);
  cu_host_.assign(mb.cu_seqlens.begin(), mb.cu_seqlens.end());
  const int64_t n1 = static_cast<int64_t>(cu_host_.size());
  ops_.copy_from_host(Tensor(cu_, kI32, {n1}, dev), cu_host_.data(), stream_);
  seqs_.cu_seqlens = Tensor(cu_, kI32, {n1}, dev);
  seqs_.cu_host = cu_host_;
  seqs_.max_seqlen = 0;
  for (int64_t i = 1; i < n1; ++i)
    seqs_.max_seqlen = std::max<int64_t>(seqs_.max_seqlen, cu_host_[i] - cu_host_[i - 1]);
  // RoPE tables of this micro-batch. Longrope switches to its long factors when the longest
  // position exceeds the original context (HF `dynamic_rope_update`: seq_len = max(pos) + 1).
  const int64_t R2 = cfg_.rotary_dim / 2;
  int64_t global_row = 0;
  if (cfg_.rope.type == RopeType::kLongrope || cfg_.rope.type == RopeType::kDynamic) {
    int32_t max_pos = 0;
    for (int32_t p : mb.position_ids) max_pos = std::max(max_pos, p);
    const int64_t seq_len = static_cast<int64_t>(max_pos) + 1;
    if (seq_len > cfg_.rope.original_max_position_embeddings) {
      if (cfg_.rope.type == RopeType::kDynamic)
        fail(
            "model: a sequence of {} positions is longer than max_position_embeddings {} under "
            "rope type \"dynamic\": transformers then rescales the RoPE base from batch to batch "
            "(a state of the run), which zerotune does not implement; set trainer.max_length <= "
            "{}",
            seq_len, cfg_.rope.original_max_position_embeddings,
            cfg_.rope.original_max_position_embeddings);
      global_row = 1;
    }
  }
  const auto inv = [&](int64_t row) {
    return Tensor(static_cast<float*>(inv_freq_) + row * R2, kF32, {R2}, dev);
  };
  const Tensor pos(pos_, kI32, {T}, dev);
  const bool scaled = cfg_.rope.type == RopeType::kLongrope || cfg_.rope.type == RopeType::kYarn;
  const float scaling = scaled ? static_cast<float>(cfg_.rope.attention_factor) : 1.0f;
  ops_.rope_tables(act(cos_, {T, R2}, kF32), act(sin_, {T, R2}, kF32), pos, inv(global_row),
                   scaling, stream_);
  if (uses_local_rope_)
    ops_.rope_tables(act(cosl_, {T, R2}, kF32), act(sinl_, {T, R2}, kF32), pos, inv(2), 1.0f,
                     stream_);
  return T;
}

namespace {
// Rows [row0, row0 + rows) of a [out, …] tensor (a fused Linear's part): a contiguous view.
Tensor rows_of(Tensor t, const LinearIds& ids) {
  if (t.shape[0] == ids.rows) return t;
  const int64_t inner = t.numel() / t.shape[0];
  t.data =
      static_cast<char*>(t.data) + ids.row0 * inner * static_cast<int64_t>(dtype_size(t.dtype));
  t.shape[0] = ids.rows;
  return t;
}
}  // namespace

Tensor CausalLM::lin_w(const LinearIds& ids) const { return rows_of(param(ids.w), ids); }
Tensor CausalLM::lin_b(const LinearIds& ids) const {
  return ids.b >= 0 ? rows_of(param(ids.b), ids) : Tensor();
}

void CausalLM::linear(const Tensor& y, const Tensor& x, const LinearIds& ids) {
  ops_.matmul(y, x, Trans::kN, lin_w(ids), Trans::kT, lin_b(ids), 1.0f, 0.0f, workspace_, stream_);
}

// dx = beta_dx*dx + dy·W; dW = beta_w*dW + dyᵀ·x; db = beta_w*db + Σ_rows dy.
void CausalLM::linear_backward(const Tensor& dx, float beta_dx, const Tensor& dy, const Tensor& x,
                               const LinearIds& ids, float beta_w, bool weight_first) {
  const auto input_grad = [&] {
    ops_.matmul(dx, dy, Trans::kN, lin_w(ids), Trans::kN, Tensor(), 1.0f, beta_dx, workspace_,
                stream_);
  };
  if (!weight_first) input_grad();
  ops_.matmul(rows_of(grad(ids.w), ids), dy, Trans::kT, x, Trans::kN, Tensor(), 1.0f, beta_w,
              workspace_, stream_);
  if (ids.b >= 0) ops_.bias_grad(rows_of(grad(ids.b), ids), dy, beta_w, stream_);
  if (weight_first) input_grad();
}

void CausalLM::norm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, int w) {
  ops_.rmsnorm_fwd(y, rstd, x, param(w), static_cast<float>(cfg_.rms_norm_eps), stream_,
                   cfg_.norm_style);
}

void CausalLM::norm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dy, const Tensor& x,
                        int w, const Tensor& rstd, float beta) {
  ops_.rmsnorm_bwd(dx, accumulate_dx, grad(w), beta, dy, x, param(w), rstd, stream_,
                   cfg_.norm_style);
}

// The kept buffers of a layer, when it has them and this pass may use them: a forward() (eval)
// must not write into lent gradient memory, so it uses the layer set's for those layers.
void* CausalLM::att_of(int l, const LayerActs& a) const {
  const auto i = static_cast<size_t>(l);
  void* k = kept_att_.empty() ? nullptr : kept_att_[i];
  return k != nullptr && (training_pass_ || !kept_lent_[i]) ? k : a.att;
}

void* CausalLM::lse_of(int l, const LayerActs& a) const {
  const auto i = static_cast<size_t>(l);
  void* k = kept_lse_.empty() ? nullptr : kept_lse_[i];
  return k != nullptr && (training_pass_ || !kept_lent_[i]) ? k : a.lse;
}

bool CausalLM::rope_of(int l, int64_t T, Tensor& cos, Tensor& sin) const {
  const int8_t r = cfg_.layer_rope[static_cast<size_t>(l)];
  if (r < 0) return false;
  const int64_t R2 = cfg_.rotary_dim / 2;
  cos = act(r == 1 ? cosl_ : cos_, {T, R2}, kF32);
  sin = act(r == 1 ? sinl_ : sin_, {T, R2}, kF32);
  return true;
}

// One decoder layer, composed from the family's choices (DESIGN §12; HF's DecoderLayer.forward):
//   h = attn_in_norm ? norm(x) : x;  q, k, v = h·Wᵀ (+b);  q, k = qk_norm(q, k);  rope(q, k)
//   a = o_proj(attention(q, k, v; window of layer l));  xmid = x + (attn_out_norm ? norm(a) : a)
//   h2 = mlp_in_norm ? norm(xmid) : xmid;  m = down(act(gate(h2)) * up(h2))
//   y = xmid + (mlp_out_norm ? norm(m) : m)
// With y == nullptr (the recomputation before a checkpointed layer's backward) the layer output
// is not formed, only what the backward reads.
void CausalLM::layer_forward(int l, const LayerActs& a, const Tensor& x, const Tensor* y,
                             int64_t T) {
  const LayerIds& p = layout_.layer(l);
  const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const DType dt = opt_.dtype;
  // Attention block.
  Tensor h = x;
  if (p.attn_in_norm >= 0) {
    h = act(a.ln1, {T, H}, dt);
    norm_fwd(h, act(a.rstd1, {T}, kF32), x, p.attn_in_norm);
  }
  const bool qkn = p.q_norm >= 0;
  linear(act(qkn ? a.q_raw : a.q, {T, Hq * D}, dt), h, p.q);
  linear(act(qkn ? a.k_raw : a.k, {T, Hkv * D}, dt), h, p.k);
  linear(act(a.v, {T, Hkv * D}, dt), h, p.v);
  if (qkn) {  // per head: rows of D; over the projection: rows of heads·D
    const bool per_head = cfg_.qk_norm == QkNorm::kPerHead;
    const int64_t rq = per_head ? T * Hq : T, rk = per_head ? T * Hkv : T;
    const int64_t cq = per_head ? D : Hq * D, ck = per_head ? D : Hkv * D;
    norm_fwd(act(a.q, {rq, cq}, dt), act(a.rstd_q, {rq}, kF32), act(a.q_raw, {rq, cq}, dt),
             p.q_norm);
    norm_fwd(act(a.k, {rk, ck}, dt), act(a.rstd_k, {rk}, kF32), act(a.k_raw, {rk, ck}, dt),
             p.k_norm);
  }
  const Tensor q3 = act(a.q, {T, Hq, D}, dt), k3 = act(a.k, {T, Hkv, D}, dt),
               v3 = act(a.v, {T, Hkv, D}, dt);
  Tensor cos, sin;
  if (rope_of(l, T, cos, sin)) {
    ops_.rope_fwd(q3, cos, sin, stream_);
    ops_.rope_fwd(k3, cos, sin, stream_);
  }
  const float scale = static_cast<float>(cfg_.attention_scale);
  const int64_t window = cfg_.layer_window[static_cast<size_t>(l)];
  void* att = att_of(l, a);
  // The recomputation of a layer whose attention output was kept skips the attention forward
  // (the same deterministic kernel would write the same bits).
  if (y != nullptr || att == a.att)
    ops_.attention_fwd(act(att, {T, Hq, D}, dt), act(lse_of(l, a), {Hq, T}, kF32), q3, k3, v3,
                       seqs_, scale, attn_bufs(a).ws, stream_, window);
  const Tensor tmp = act(tmp_, {T, H}, dt), xmid = act(a.xmid, {T, H}, dt);
  if (p.attn_out_norm >= 0) {
    const Tensor ao = act(a.attn_out, {T, H}, dt);
    linear(ao, act(att, {T, Hq * D}, dt), p.o);
    norm_fwd(tmp, act(a.rstd_ao, {T}, kF32), ao, p.attn_out_norm);
  } else {
    linear(tmp, act(att, {T, Hq * D}, dt), p.o);
  }
  ops_.add(xmid, x, tmp, stream_);
  // MLP block.
  Tensor h2 = xmid;
  if (p.mlp_in_norm >= 0) {
    h2 = act(a.ln2, {T, H}, dt);
    norm_fwd(h2, act(a.rstd2, {T}, kF32), xmid, p.mlp_in_norm);
  }
  const Tensor gate = act(a.gate, {T, I}, dt), up = act(a.up, {T, I}, dt),
               hm = act(a.act, {T, I}, dt);
  linear(gate, h2, p.gate);
  linear(up, h2, p.up);
  ops_.swiglu_fwd(hm, gate, up, stream_, cfg_.mlp_act);
  if (p.mlp_out_norm >= 0) {
    const Tensor mo = act(a.mlp_out, {T, H}, dt);
    linear(mo, hm, p.down);
    norm_fwd(tmp, act(a.rstd_mo, {T}, kF32), mo, p.mlp_out_norm);
  } else {
    if (y == nullptr) return;  // recomputation: the layer output is not needed
    linear(tmp, hm, p.down);
  }
  if (y != nullptr) ops_.add(*y, xmid, tmp, stream_);
}

// In: dres = dL/d(layer output). Out: dres = dL/dx. gate/up are overwritten by their gradients;
// tmp holds the gradient of a post-normed branch's input.
void CausalLM::layer_backward(int l, const LayerActs& a, const Tensor& x, int64_t T, float beta) {
  const LayerIds& p = layout_.layer(l);
  const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const DType dt = opt_.dtype;
  const Tensor dres = act(dres_, {T, H}, dt), dh = act(dh_, {T, H}, dt);
  const Tensor tmp = act(tmp_, {T, H}, dt), dh32 = act(dh32_, {T, H}, kF32);
  const Tensor& dh_acc = dt == kF32 ? dh : dh32;  // where the input gradients are summed
  // dres += d(branch input) from dh: through the branch's input norm, or directly.
  const auto into_residual = [&](int norm, const Tensor& branch_in, void* rstd) {
    if (dt != kF32) ops_.cast(dh, dh32, stream_);
    if (norm >= 0)
      norm_bwd(dres, true, dh, branch_in, norm, act(rstd, {T}, kF32), beta);
    else
      ops_.add(dres, dres, dh, stream_);
  };
  // MLP: the gradient of its output m (through mlp_out_norm when there is one).
  Tensor dm = dres;
  if (p.mlp_out_norm >= 0) {
    norm_bwd(tmp, false, dres, act(a.mlp_out, {T, H}, dt), p.mlp_out_norm,
             act(a.rstd_mo, {T}, kF32), beta);
    dm = tmp;
  }
  // d(act) overwrites act (dead once the down projection's weight gradient has read it).
  const Tensor gate = act(a.gate, {T, I}, dt), up = act(a.up, {T, I}, dt),
               dact = act(a.act, {T, I}, dt);
  linear_backward(dact, 0.0f, dm, dact, p.down, beta, /*weight_first=*/true);
  ops_.swiglu_bwd(gate, up, dact, gate, up, stream_, cfg_.mlp_act);  // gate := dgate, up := dup
  const Tensor xmid = act(a.xmid, {T, H}, dt);
  const Tensor h2 = p.mlp_in_norm >= 0 ? act(a.ln2, {T, H}, dt) : xmid;
  linear_backward(dh_acc, 0.0f, gate, h2, p.gate, beta);
  linear_backward(dh_acc, 1.0f, up, h2, p.up, beta);
  into_residual(p.mlp_in_norm, xmid, a.rstd2);
  // Attention: the gradient of o_proj's output (through attn_out_norm when there is one).
  Tensor dao = dres;
  if (p.attn_out_norm >= 0) {
    norm_bwd(tmp, false, dres, act(a.attn_out, {T, H}, dt), p.attn_out_norm,
             act(a.rstd_ao, {T}, kF32), beta);
    dao = tmp;
  }
  // From here on the MLP activations (gate, up, act) are dead: attn_bufs may be carved from them.
  const AttnBufs ab = attn_bufs(a);
  const Tensor datt = act(ab.datt, {T, Hq * D}, dt);
  void* att = att_of(l, a);
  linear_backward(datt, 0.0f, dao, act(att, {T, Hq * D}, dt), p.o, beta);
  const Tensor dq3 = act(ab.dq, {T, Hq, D}, dt), dk3 = act(ab.dk, {T, Hkv, D}, dt),
               dv3 = act(ab.dv, {T, Hkv, D}, dt);
  const float scale = static_cast<float>(cfg_.attention_scale);
  const int64_t window = cfg_.layer_window[static_cast<size_t>(l)];
  ops_.attention_bwd(dq3, dk3, dv3, act(ab.datt, {T, Hq, D}, dt), act(a.q, {T, Hq, D}, dt),
                     act(a.k, {T, Hkv, D}, dt), act(a.v, {T, Hkv, D}, dt), act(att, {T, Hq, D}, dt),
                     act(lse_of(l, a), {Hq, T}, kF32), seqs_, scale, ab.ws, stream_, window);
  Tensor cos, sin;
  if (rope_of(l, T, cos, sin)) {
    ops_.rope_bwd(dq3, cos, sin, stream_);
    ops_.rope_bwd(dk3, cos, sin, stream_);
  }
  if (p.q_norm >= 0) {  // in place: dq, dk become the gradients of q_raw, k_raw
    const bool per_head = cfg_.qk_norm == QkNorm::kPerHead;
    const int64_t rq = per_head ? T * Hq : T, rk = per_head ? T * Hkv : T;
    const int64_t cq = per_head ? D : Hq * D, ck = per_head ? D : Hkv * D;
    norm_bwd(act(ab.dq, {rq, cq}, dt), false, act(ab.dq, {rq, cq}, dt), act(a.q_raw, {rq, cq}, dt),
             p.q_norm, act(a.rstd_q, {rq}, kF32), beta);
    norm_bwd(act(ab.dk, {rk, ck}, dt), false, act(ab.dk, {rk, ck}, dt), act(a.k_raw, {rk, ck}, dt),
             p.k_norm, act(a.rstd_k, {rk}, kF32), beta);
  }
  const Tensor h = p.attn_in_norm >= 0 ? act(a.ln1, {T, H}, dt) : x;
  linear_backward(dh_acc, 0.0f, act(ab.dq, {T, Hq * D}, dt), h, p.q, beta);
  linear_backward(dh_acc, 1.0f, act(ab.dk, {T, Hkv * D}, dt), h, p.k, beta);
  linear_backward(dh_acc, 1.0f, act(ab.dv, {T, Hkv * D}, dt), h, p.v, beta);
  into_residual(p.attn_in_norm, x, a.rstd1);
}

// Acquires group 0 (kept) and the head group (kept), each layer's group only around its forward.
void CausalLM::forward_trunk(int64_t T, const std::vector<void*>& xs) {
  const int L = layout_.num_layers();
  const auto x = [&](int l) {
    return act(xs[static_cast<size_t>(l)], {T, cfg_.hidden_size}, opt_.dtype);
  };
  acquire(0);
  ops_.embedding_fwd(x(0), param(layout_.embed()), Tensor(tokens_, kI32, {T}, inputs_.device()),
                     stream_, embed_scale_);
  for (int l = 0; l < L; ++l) {
    const LayerActs& a = layer_acts_[opt_.checkpointing ? 0 : static_cast<size_t>(l)];
    const Tensor y = x(l + 1);
    const int g = ParamLayout::group_of_layer(l);
    acquire(g);
    layer_forward(l, a, x(l), &y, T);
    release(g);
  }
  acquire(layout_.group_head());
  norm_fwd(act(lnf_, {T, cfg_.hidden_size}, opt_.dtype), act(rstdf_, {T}, kF32), x(L),
           layout_.final_norm());
  last_T_ = T;
}

CeStats CausalLM::forward(const MicroBatch& mb) {
  const int64_t T = stage_inputs(mb);
  training_pass_ = false;
  forward_trunk(T, xs_eval_);
  CeStats st;
  ops_.linear_cross_entropy_fwd_bwd(
      &st, Tensor(), Tensor(), 0.0f, act(lnf_, {T, cfg_.hidden_size}, opt_.dtype),
      param(layout_.lm_head()), Tensor(targets_, kI32, {T}, inputs_.device()), 1.0f, ce_workspace_,
      stream_);
  release(layout_.group_head());
  release(0);
  ops_.synchronize(stream_);
  return st;
}

CeStats CausalLM::forward_backward(const MicroBatch& mb, const BackwardOptions& bo) {
  if (bo.accumulate && (residuals_in_grads_ > 0 || att_in_grads_ > 0))
    fail(
        "model: forward_backward with accumulate = true, but the storage lent its gradient memory "
        "for the residual stream or attention outputs (one micro-step per optimizer step): nothing "
        "can be added to it");
  const int64_t T = stage_inputs(mb);
  training_pass_ = true;
  forward_trunk(T, xs_);
  const int L = layout_.num_layers();
  const int64_t H = cfg_.hidden_size;
  const DType dt = opt_.dtype;
  const float beta = bo.accumulate ? 1.0f : 0.0f;
  // Head: fused LM head + cross-entropy, then the final norm. A tied LM head writes group 0's
  // gradient here already.
  const int head = layout_.group_head();
  take_grads(head);
  if (layout_.tied()) take_grads(0);
  CeStats st;
  const Tensor dh = act(dh_, {T, H}, dt), dres = act(dres_, {T, H}, dt);
  ops_.linear_cross_entropy_fwd_bwd(
      &st, dh, grad(layout_.lm_head()), beta, act(lnf_, {T, H}, dt), param(layout_.lm_head()),
      Tensor(targets_, kI32, {T}, inputs_.device()), bo.grad_scale, ce_workspace_, stream_);
  norm_bwd(dres, false, dh, residual(L, T), layout_.final_norm(), act(rstdf_, {T}, kF32), beta);
  grads_ready(head);
  release(head);
  for (int l = L - 1; l >= 0; --l) {
    const LayerActs& a = layer_acts_[opt_.checkpointing ? 0 : static_cast<size_t>(l)];
    const int g = ParamLayout::group_of_layer(l);
    acquire(g);
    take_grads(g);
    if (opt_.checkpointing) layer_forward(l, a, residual(l, T), nullptr, T);
    layer_backward(l, a, residual(l, T), T, beta);
    grads_ready(g);
    release(g);
  }
  // A tied embedding already holds the LM head's gradient: add to it.
  take_grads(0);
  // HF's nn.Embedding(padding_idx = pad_token_id): the lookup adds nothing to the pad row's
  // gradient (a tied head's share and earlier micro-steps' sums stay; else the row is 0).
  const bool keep_pad_row = layout_.tied() || bo.accumulate;
  const Tensor pad_grad =
      pad_row_ < 0 ? Tensor()
                   : Tensor(grad(layout_.embed()).as<float>() + pad_row_ * H, kF32, {H}, device_);
  const Tensor pad_save = act(pad_save_, {H}, kF32);
  if (pad_row_ >= 0 && keep_pad_row) ops_.cast(pad_save, pad_grad, stream_);
  ops_.embedding_bwd(grad(layout_.embed()), dres, Tensor(tokens_, kI32, {T}, inputs_.device()),
                     layout_.tied() ? 1.0f : beta, workspace_, stream_, embed_scale_);
  if (pad_row_ >= 0) {
    if (keep_pad_row)
      ops_.cast(pad_grad, pad_save, stream_);
    else
      ops_.zero(pad_grad, stream_);
  }
  grads_ready(0);
  release(0);
  ops_.synchronize(stream_);
  return st;
}

void CausalLM::logits(int64_t row0, int64_t n, std::span<float> out) {
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size;
  if (last_T_ < 0) fail("model.logits: no forward has run");
  if (row0 < 0 || n < 0 || row0 + n > last_T_)
    fail("model.logits: rows [{}, {}) outside the last micro-batch's {} tokens", row0, row0 + n,
         last_T_);
  if (static_cast<int64_t>(out.size()) < n * V)
    fail("model.logits: output has {} floats, {} needed", out.size(), n * V);
  const size_t es = dtype_size(opt_.dtype);
  const int g = layout_.param(layout_.lm_head()).group;
  acquire(g);
  for (int64_t r = 0; r < n; r += kLogitRows) {
    const int64_t m = std::min(kLogitRows, n - r);
    const Tensor rows(static_cast<char*>(lnf_) + (row0 + r) * H * es, opt_.dtype, {m, H},
                      acts_.device());
    const Tensor lg = act(logits_buf_, {m, V}, kF32);
    ops_.matmul(lg, rows, Trans::kN, param(layout_.lm_head()), Trans::kT, Tensor(), 1.0f, 0.0f,
                workspace_, stream_);
    ops_.copy_to_host(out.data() + r * V, lg, stream_);
  }
  release(g);
  ops_.synchronize(stream_);
}

}  // namespace zt
