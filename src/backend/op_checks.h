// Argument checks shared by the Ops implementations (backend/cpu, backend/cuda): each throws
// zt::Error naming the op, the argument, what it got and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "core/tensor.h"

namespace zt::opcheck {

// Throws zt::Error "<op>: <arg> is [2, 3] f32, expected shape [4, 3]" unless t has exactly `dims`
// (a -1 entry matches any size). Also rejects a tensor on another device than `device` ("<op>: <arg>
// is not in host memory" / "... device memory") and, when require_data, a null pointer for a
// non-empty tensor (workspace-size queries pass shape-only tensors).
void check_shape(std::string_view op, std::string_view arg, const Tensor& t,
                 std::initializer_list<int64_t> dims, Device device, bool require_data = true);
// Throws zt::Error naming op/arg unless t lives on `device` (same messages as check_shape).
void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device device);
// Throws zt::Error naming op/arg unless t.dtype == want.
void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want);
// Throws zt::Error naming op/arg unless t.dtype is f32 or bf16.
void check_float(std::string_view op, std::string_view arg, const Tensor& t);
// Throws zt::Error naming op and both args unless a and b have the same dtype.
void check_same_dtype(std::string_view op, std::string_view an, const Tensor& a,
                      std::string_view bn, const Tensor& b);
// Throws zt::Error unless the workspace has at least `need` bytes.
void check_workspace(std::string_view op, const Tensor& ws, size_t need);

}  // namespace zt::opcheck
