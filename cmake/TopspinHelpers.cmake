# topspin_module(NAME DEPS dep...)
#
# Defines the static library topspin_NAME (alias topspin::NAME) from
# src/NAME/*.cc, with include/ public and src/ private. Files ending in
# _test.cc are not part of the library: they form one GoogleTest binary,
# NAME_test, whose cases are registered with ctest by topspin_add_test.
function(topspin_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  set(dir ${CMAKE_SOURCE_DIR}/src/${name})
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cc)
  set(tests ${sources})
  list(FILTER sources EXCLUDE REGEX "_(test|bench|fuzz)\\.cc$")
  list(FILTER tests INCLUDE REGEX "_test\\.cc$")
  if(NOT sources)
    message(FATAL_ERROR "module ${name}: no sources in src/${name}/")
  endif()
  add_library(topspin_${name} STATIC ${sources})
  add_library(topspin::${name} ALIAS topspin_${name})
  target_include_directories(topspin_${name}
    PUBLIC ${CMAKE_SOURCE_DIR}/include
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(topspin_${name} PUBLIC ${ARG_DEPS})
  if(tests)
    topspin_add_test(${name}_test SOURCES ${tests} DEPS topspin::${name})
  endif()
  file(GLOB fuzzers CONFIGURE_DEPENDS ${dir}/*_fuzz.cc)
  foreach(fuzzer ${fuzzers})
    topspin_add_fuzzer(${fuzzer} topspin::${name})
  endforeach()
endfunction()

# topspin_add_fuzzer(SOURCE DEP)
#
# SOURCE defines LLVMFuzzerTestOneInput. With TOPSPIN_FUZZ=ON (clang) it
# becomes a libFuzzer binary NAME (make asan runs each for a bounded time).
# In every build it also becomes NAME_replay, which ctest runs over the kept
# inputs in tests/fuzz/NAME/ (seeds and every crash ever found).
function(topspin_add_fuzzer source dep)
  get_filename_component(name ${source} NAME_WE)
  add_executable(${name}_replay ${source} ${CMAKE_SOURCE_DIR}/tests/fuzz_replay_main.cc)
  target_include_directories(${name}_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name}_replay PRIVATE ${dep})
  add_test(NAME ${name}_regressions
    COMMAND ${name}_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/${name})
  if(TOPSPIN_FUZZ)
    add_executable(${name} ${source})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} PRIVATE ${dep})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()

# topspin_add_test(NAME SOURCES src... DEPS dep...)
#
# The one place tests are registered: builds a GoogleTest binary and adds
# each of its test cases to ctest (discovered when ctest runs).
function(topspin_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  # Listing a test binary loads LibTorch's ~1 GB of libraries: from a cold
  # page cache on a busy 2-core machine that takes longer than the 5 s
  # default.
  # DdpRank.* and DataParallelRank.* are the worker entry points that
  # multi-process tests spawn (with --gtest_filter): not tests of their own.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    TEST_FILTER "-DdpRank.*:DataParallelRank.*"
    PROPERTIES ENVIRONMENT "TOPSPIN_TEST_TMPDIR=${CMAKE_BINARY_DIR}/test-tmp")
  # The interpreter tests that run Python use unless TOPSPIN_PYTHON says
  # otherwise: the venv's (torch, tensorboard), else python3.
  if(TOPSPIN_TORCH_PYTHON)
    target_compile_definitions(${name} PRIVATE TOPSPIN_TEST_PYTHON="${TOPSPIN_TORCH_PYTHON}")
  endif()
endfunction()

# topspin_venv_python(OUT): the interpreter whose wheels the build uses:
# TOPSPIN_PYTHON, else the project's .venv/bin/python, else empty.
function(topspin_venv_python out)
  set(python "${TOPSPIN_PYTHON}")
  if(NOT python AND EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
    set(python "${CMAKE_SOURCE_DIR}/.venv/bin/python")
  endif()
  set(${out} "${python}" PARENT_SCOPE)
endfunction()

# topspin_find_venv_torch()
#
# LibTorch comes from the torch wheel in the project's virtualenv (.venv/,
# made by scripts/install-deps.sh; TOPSPIN_PYTHON names another
# interpreter). A user's own LibTorch wins: with -DTorch_DIR=... or Torch
# already on CMAKE_PREFIX_PATH nothing is added. The wheel is built for CUDA,
# so its CMake config needs a CUDA toolkit (nvcc): the system's when there is
# one, else the nvcc wheel install-deps.sh puts into the same venv.
function(topspin_find_venv_torch)
  if(Torch_DIR)
    return()
  endif()
  topspin_venv_python(python)
  if(NOT python)
    return()
  endif()
  execute_process(
    COMMAND "${python}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__)"
    OUTPUT_VARIABLE out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(STATUS "topspin: ${python} has no torch; run scripts/install-deps.sh")
    return()
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 prefix)
  list(GET out 1 version)
  message(STATUS "topspin: LibTorch from the torch ${version} wheel (${prefix})")
  # No system CUDA toolkit: the venv's nvcc wheels (scripts/install-deps.sh)
  # are the toolkit torch's CMake config asks for.
  get_filename_component(cu13 "${prefix}/../../../nvidia/cu13" ABSOLUTE)
  find_program(system_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
  if(NOT system_nvcc AND NOT CMAKE_CUDA_COMPILER AND EXISTS "${cu13}/bin/nvcc")
    message(STATUS "topspin: no system nvcc; using the venv's (${cu13})")
    set(CMAKE_CUDA_COMPILER "${cu13}/bin/nvcc" CACHE FILEPATH "nvcc of the venv's CUDA wheels")
    set(CUDA_TOOLKIT_ROOT_DIR "${cu13}" CACHE PATH "the venv's CUDA wheels")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${prefix}")

  set(CMAKE_PREFIX_PATH "${CMAKE_PREFIX_PATH}" PARENT_SCOPE)
  set(TOPSPIN_TORCH_PYTHON "${python}" CACHE INTERNAL "the interpreter whose torch wheel LibTorch came from")
endfunction()

# topspin_find_pyarrow()
#
# Arrow C++ and Parquet (Parquet import, src/parquet/) come from the pyarrow
# wheel in the project's virtualenv, as pyarrow documents for C++ consumers:
# pyarrow.get_include() holds the headers, pyarrow.get_library_dirs() the
# versioned libraries (libarrow.so.2600 for 26.0.x). The wheel ships no
# CMake package, so this defines imported targets topspin_libarrow and
# topspin_libparquet on the full library paths; the build's run path then
# points into the wheel. Sets TOPSPIN_HAVE_PARQUET in the caller.
function(topspin_find_pyarrow)
  set(TOPSPIN_HAVE_PARQUET OFF PARENT_SCOPE)
  topspin_venv_python(python)
  if(NOT python)
    message(STATUS "topspin: no .venv; Parquet import is not built (run scripts/install-deps.sh)")
    return()
  endif()
  execute_process(
    COMMAND "${python}" -c "import pyarrow as pa; print(pa.get_include()); print(pa.get_library_dirs()[0]); print(pa.__version__)"
    OUTPUT_VARIABLE out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(STATUS "topspin: ${python} has no pyarrow; Parquet import is not built (run scripts/install-deps.sh)")
    return()
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 include_dir)
  list(GET out 1 lib_dir)
  list(GET out 2 version)
  # 26.0.1 -> libarrow.so.2600 (major * 100 + minor).
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${version}")
  math(EXPR so_version "${CMAKE_MATCH_1} * 100 + ${CMAKE_MATCH_2}")
  foreach(lib arrow parquet)
    set(path "${lib_dir}/lib${lib}.so.${so_version}")
    if(NOT EXISTS "${path}")
      message(STATUS "topspin: pyarrow ${version} has no ${path}; Parquet import is not built")
      return()
    endif()
    add_library(topspin_lib${lib} SHARED IMPORTED GLOBAL)
    set_target_properties(topspin_lib${lib} PROPERTIES
      IMPORTED_LOCATION "${path}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${include_dir}"
      INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
  endforeach()
  set_property(TARGET topspin_libparquet PROPERTY INTERFACE_LINK_LIBRARIES topspin_libarrow)
  message(STATUS "topspin: Arrow C++ ${version} from the pyarrow wheel (${lib_dir}); building Parquet import")
  set(TOPSPIN_HAVE_PARQUET ON PARENT_SCOPE)
  set(TOPSPIN_ARROW_LIB_DIR "${lib_dir}" PARENT_SCOPE)
endfunction()
