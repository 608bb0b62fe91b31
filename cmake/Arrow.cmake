# Apache Arrow C++ / Parquet from the pyarrow wheel in .venv (scripts/setup.sh installs it).
# The wheel ships headers and versioned shared libraries; we link them by full path with an RPATH.
set(ZT_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "Python with pyarrow")
if(NOT EXISTS "${ZT_PYTHON}")
  message(FATAL_ERROR "zerotune: ${ZT_PYTHON} not found; run scripts/setup.sh first")
endif()
execute_process(
  COMMAND "${ZT_PYTHON}" -c "import pyarrow, os; print(pyarrow.get_include()); print(os.path.dirname(pyarrow.__file__)); print(pyarrow.__version__)"
  OUTPUT_VARIABLE _pa OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _pa_rc)
if(NOT _pa_rc EQUAL 0)
  message(FATAL_ERROR "zerotune: pyarrow is not importable by ${ZT_PYTHON}; run scripts/setup.sh")
endif()
string(REPLACE "\n" ";" _pa "${_pa}")
list(GET _pa 0 ARROW_INCLUDE_DIR)
list(GET _pa 1 ARROW_LIB_DIR)
list(GET _pa 2 ARROW_VERSION)
string(REGEX MATCH "^([0-9]+)" _pa_major "${ARROW_VERSION}")
set(_so "${_pa_major}00")
find_file(ARROW_SO libarrow.so.${_so} PATHS "${ARROW_LIB_DIR}" NO_DEFAULT_PATH REQUIRED)
find_file(PARQUET_SO libparquet.so.${_so} PATHS "${ARROW_LIB_DIR}" NO_DEFAULT_PATH REQUIRED)
# Arrow's compute kernels (the CSV reader's cast of later chunks, rows_csv.cpp).
find_file(ARROW_COMPUTE_SO libarrow_compute.so.${_so} PATHS "${ARROW_LIB_DIR}" NO_DEFAULT_PATH
          REQUIRED)
add_library(zt_arrow INTERFACE)
target_include_directories(zt_arrow SYSTEM INTERFACE "${ARROW_INCLUDE_DIR}")
target_link_libraries(zt_arrow INTERFACE "${PARQUET_SO}" "${ARROW_COMPUTE_SO}" "${ARROW_SO}")
target_link_options(zt_arrow INTERFACE "-Wl,-rpath,${ARROW_LIB_DIR}")
message(STATUS "zerotune: Arrow ${ARROW_VERSION} from ${ARROW_LIB_DIR}")
