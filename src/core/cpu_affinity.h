// How many CPUs this process may run on.
#pragma once

namespace zt {

// CPUs in this process's affinity mask (sched_getaffinity: taskset, a cgroup cpuset, a batch
// scheduler's binding); 0 when it cannot be read (more than 1024 CPUs, an error).
unsigned affinity_cpu_count();

}  // namespace zt
