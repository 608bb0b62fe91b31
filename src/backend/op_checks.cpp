// Argument checks shared by the Ops implementations. See op_checks.h.
#include "backend/op_checks.h"

#include <string>

#include "core/error.h"

namespace zt::opcheck {

void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device device) {
  if (t.device != device)
    fail("{}: {} is not in {} memory", op, arg, device == Device::kCPU ? "host" : "device");
}

void check_shape(std::string_view op, std::string_view arg, const Tensor& t,
                 std::initializer_list<int64_t> dims, Device device, bool require_data) {
  bool ok = t.ndim == static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (ok && d >= 0 && t.shape[i] != d) ok = false;
    ++i;
  }
  if (!ok) {
    std::string want = "[";
    i = 0;
    for (int64_t d : dims)
      want += (i++ ? ", " : "") + (d < 0 ? std::string("*") : std::to_string(d));
    fail("{}: {} is {}, expected shape {}]", op, arg, t.describe(), want);
  }
  check_device(op, arg, t, device);
  if (require_data && t.data == nullptr && t.numel() > 0)
    fail("{}: {} {} has no data", op, arg, t.describe());
}

void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want) {
  if (t.dtype != want)
    fail("{}: {} has dtype {}, expected {}", op, arg, dtype_name(t.dtype), dtype_name(want));
}

void check_float(std::string_view op, std::string_view arg, const Tensor& t) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    fail("{}: {} has dtype {}, expected f32 or bf16", op, arg, dtype_name(t.dtype));
}

void check_same_dtype(std::string_view op, std::string_view an, const Tensor& a,
                      std::string_view bn, const Tensor& b) {
  if (a.dtype != b.dtype)
    fail("{}: {} has dtype {} but {} has dtype {}; they must match", op, an, dtype_name(a.dtype),
         bn, dtype_name(b.dtype));
}

void check_workspace(std::string_view op, const Tensor& ws, size_t need) {
  if (need == 0) return;
  if (ws.data == nullptr || ws.nbytes() < need)
    fail("{}: workspace has {} bytes, {} needed", op, ws.data ? ws.nbytes() : 0, need);
}

}  // namespace zt::opcheck
