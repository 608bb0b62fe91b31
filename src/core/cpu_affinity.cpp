#include "core/cpu_affinity.h"

#include <sched.h>

namespace zt {

unsigned affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

}  // namespace zt
