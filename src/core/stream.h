// Stream and Event: the opaque queue and marker handles every device-facing layer passes around
// (backend Ops, dist Comms, the ZeRO engine). A Stream is a cudaStream_t on CUDA (nullptr = the
// legacy default stream); an Event a cudaEvent_t. On the CPU both are unused: ops and collectives
// complete before they return. Created and destroyed by Ops (create_stream / create_event).
#pragma once

namespace zt {

// Opaque queue handle: a cudaStream_t on CUDA, unused (nullptr) on the CPU.
struct Stream {
  void* handle = nullptr;
};

// Opaque marker in a stream: a cudaEvent_t on CUDA, unused (nullptr) on the CPU.
struct Event {
  void* handle = nullptr;
};

}  // namespace zt
