// GroupStorage: where the model finds one parameter group's weights and gradient buffer (groups:
// ParamLayout — the embedding, one decoder layer, the final norm + untied head). The one
// interface between the model and whoever keeps the parameters: the model asks for a group's
// weights before it uses them and hands the group's gradients back when they are final, so a call
// site in the model shows where the storage may gather weights or reduce gradients.
// Implementations: OwnedStorage (model/owned_storage.h: the model's own full buffers, for
// `zerotune loss` and tests) and zero::ZeroEngine (the trainer: windowed gradients reduce-scattered
// per group; stage 3 gathers each group's weights into a slot).
//
// The model calls these on the host as it enqueues work on its stream (CausalLM::stream()); work a
// storage enqueues (a gather into a slot, a bucket pack) must be ordered on that stream. Per pass
// (head = num_groups() - 1, L = num_layers()):
//   forward() (eval): weights(0); for l: weights(1+l), layer l, release(1+l); weights(head),
//     LM head + CE, release(head), release(0).
//   forward_backward(): the same forward up to weights(head) and the final norm (group 0 stays
//     held for the whole pass: a tied lm_head is the embedding); grads(head) (and grads(0) when
//     tied), LM head + CE backward, final-norm backward, grads_ready(head), release(head); for
//     l = L-1..0: weights(1+l), grads(1+l), (recompute), layer backward, grads_ready(1+l),
//     release(1+l); grads(0), embedding backward, grads_ready(0), release(0).
//   logits(): weights(g), release(g) of the lm_head's group (0 when tied, else head).
// A pass that throws stops where it is (held groups are not released).
#pragma once

namespace zt {

class GroupStorage {
 public:
  virtual ~GroupStorage() = default;

  // Group g's compute weights for one use: [group_end(g) - group_begin(g)] elements of the
  // model's compute dtype on the model's device, laid out as ParamLayout lays out the flat buffer
  // from group_begin(g) (padding included). May all-gather them first (ZeRO-3: a collective, so
  // every rank must make the same calls) or make the stream wait for an earlier gather. The model
  // reads them only until release(g). nullptr: the storage has none (the model throws).
  virtual const void* weights(int g) = 0;
  // The model is done with group g's weights until it asks again.
  virtual void release(int g) = 0;
  // Group g's fp32 gradient buffer for the backward about to write it ([group size], the layout
  // of weights(g); the padding between parameters holds zeros and is never written). Valid until
  // grads_ready(g); a tied group 0 is asked for at the start of the backward (the LM head writes
  // it) and again before the embedding backward, and must be the same buffer both times.
  virtual float* grads(int g) = 0;
  // Group g's gradients of this micro-batch are final, in the order head, …, 1, 0. May
  // reduce-scatter them (a collective); the buffer may be reused afterwards.
  virtual void grads_ready(int g) = 0;
  // Group g's gradient buffer while it holds nothing the storage needs: the buffer grads(g) will
  // return ([group_end(g) - group_begin(g)] fp32, fixed for the storage's lifetime, no padding
  // between parameters), which forward_backward may use as scratch from its start until it asks
  // grads(g) — the backward (accumulate = false) then overwrites every element. nullptr (the
  // default) when the buffer carries something between calls (a sum over micro-steps, padding
  // that must stay zero, a window other groups share). Ordering: a storage may still be reading
  // the buffer when it hands it out (ZeroEngine's overlapped update reads group g's columns until
  // weights(g) has returned); it is safe to write once weights() of a group whose update comes
  // after g's has returned — CausalLM writes group g's scratch only while computing a layer above
  // g, after that layer's weights() (zero/zero_engine.h).
  virtual void* gradient_scratch(int g) {
    (void)g;
    return nullptr;
  }
};

}  // namespace zt
