// A CUPTI activity tracer that the CUDA driver loads into any process: run a program with
//   CUDA_INJECTION64_PATH=/path/libzt_gpu_trace.so ZT_TRACE_OUT=trace.tsv program …
// and, when it exits, trace.tsv holds one tab-separated line per record (times in ns on CUPTI's
// clock, the same for the device and the host records):
//   kind  start  end  stream  correlation  name
// kind: `kernel`, `memcpy`, `memset` (device work; stream = CUDA stream id), `api` (a CUDA
// runtime or driver call on the host; stream = host thread id), `sync` (a host synchronisation:
// stream, event or context; name = its type). A kernel's correlation id is its launching api
// record's, so a gap before a kernel can be told apart: launched late by the host, or waiting on
// work. bench/gpu_trace_summary.py reads the file. This exists because the GPU machine has no
// Nsight Systems (the device README): ncu serialises kernels and cannot see the idle time between
// them. Interface: CUDA's injection entry point InitializeInjection (CUDA driver API docs,
// "CUDA_INJECTION64_PATH") and the CUPTI activity API (cupti_activity.h, CUDA 13: kernel records
// CUpti_ActivityKernel10, memcpy 6, memset 4, API CUpti_ActivityAPI, synchronization 2).
// Errors: each failing CUPTI call prints its message to stderr; if the callbacks cannot be
// registered nothing is traced, and a record kind that cannot be enabled is left out. The traced
// process itself is not changed. Records CUPTI drops (buffer full) are counted and reported at
// exit. Every process that inherits the two variables writes the same file: trace one process at a
// time.

#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

std::mutex g_mu;
FILE* g_out = nullptr;
size_t g_dropped = 0;

bool ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "zt_gpu_trace: %s: %s\n", what, msg ? msg : "unknown CUPTI error");
  return false;
}

// A kernel name demangled when it is a mangled C++ name, cut to 240 characters (tabs and newlines
// cannot occur in either form).
std::string kernel_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = (status == 0 && d != nullptr) ? d : mangled;
  std::free(d);
  if (s.size() > 240) s.resize(240);
  return s;
}

void write(const char* kind, uint64_t start, uint64_t end, uint32_t stream, uint32_t corr,
           const std::string& name) {
  std::fprintf(g_out, "%s\t%llu\t%llu\t%u\t%u\t%s\n", kind, static_cast<unsigned long long>(start),
               static_cast<unsigned long long>(end), stream, corr, name.c_str());
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  while (g_out != nullptr && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        write("kernel", k->start, k->end, k->streamId, k->correlationId, kernel_name(k->name));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        write("memcpy", m->start, m->end, m->streamId, m->correlationId,
              "memcpy kind " + std::to_string(m->copyKind) + " " + std::to_string(m->bytes) + " B");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        write("memset", m->start, m->end, m->streamId, m->correlationId,
              "memset " + std::to_string(m->bytes) + " B");
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        const char* name = nullptr;
        cuptiGetCallbackName(rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                      : CUPTI_CB_DOMAIN_DRIVER_API,
                             a->cbid, &name);
        write("api", a->start, a->end, a->threadId, a->correlationId, name ? name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
        write("sync", s->start, s->end, s->streamId, s->correlationId,
              "sync type " + std::to_string(static_cast<int>(s->type)));
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
    g_dropped += dropped;
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out == nullptr) return;
  if (g_dropped > 0) std::fprintf(stderr, "zt_gpu_trace: %zu records dropped\n", g_dropped);
  std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH). Returns 1 (the
// driver ignores the value).
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("ZT_TRACE_OUT");
  g_out = std::fopen(path && *path ? path : "zt_trace.tsv", "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "zt_gpu_trace: cannot write %s\n", path && *path ? path : "zt_trace.tsv");
    return 1;
  }
  if (!ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register")) return 1;
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                      CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET,
                                      CUPTI_ACTIVITY_KIND_RUNTIME,
                                      CUPTI_ACTIVITY_KIND_DRIVER,
                                      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  for (CUpti_ActivityKind k : kinds) ok(cuptiActivityEnable(k), "enable");
  std::atexit(finish);
  return 1;
}
