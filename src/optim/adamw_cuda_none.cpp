// adamw_cuda in a build without CUDA (adamw_cuda.cu is compiled only with it): a clear error.
#include "optim/adamw.h"

#if !defined(ZT_HAVE_CUDA)
#include "core/error.h"

namespace zt::optim {

void adamw_cuda(const AdamWStep&, float*, float*, float*, const float*, size_t, uint16_t*, void*) {
  fail("adamw_cuda: this zerotune was built without CUDA");
}

void adamw_split_cuda(const AdamWStep&, uint16_t*, uint16_t*, float*, float*, const float*, size_t,
                      void*) {
  fail("adamw_split_cuda: this zerotune was built without CUDA");
}

}  // namespace zt::optim
#endif
