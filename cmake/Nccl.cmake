# NCCL for the device Comm (src/dist/nccl): header and library next to the CUDA toolkit (where the
# CUDA containers and the NVIDIA apt packages put them), or under NCCL_HOME. Sets ZT_HAVE_NCCL and
# the imported target zt_nccl; without NCCL the build goes on with the CPU Comms only.
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib lib64)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE "[^0-9;]" "" _nccl_ver "${_nccl_ver}")
  string(REPLACE ";" "." _nccl_ver "${_nccl_ver}")
  add_library(zt_nccl INTERFACE IMPORTED)
  target_include_directories(zt_nccl SYSTEM INTERFACE "${NCCL_INCLUDE_DIR}")
  target_link_libraries(zt_nccl INTERFACE "${NCCL_LIBRARY}")
  set(ZT_HAVE_NCCL ON)
  message(STATUS "zerotune: NCCL ${_nccl_ver} from ${NCCL_LIBRARY}")
else()
  message(STATUS "zerotune: NCCL not found (set NCCL_HOME); building without the device Comm")
endif()
