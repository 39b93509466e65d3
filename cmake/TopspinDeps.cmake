# Finds every dependency. scripts/install-deps.sh installs them on Debian 12.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
# The torch wheel ships its own fmt headers (a newer major version) in its
# include directory, which would shadow the system fmt that libfmt.so and
# spdlog were built with. A directory holding only a link to the system
# fmt headers, searched first (-I comes before -isystem) by every target
# that sees LibTorch's headers, keeps them ours (topspin_torch_module).
find_path(TOPSPIN_FMT_INCLUDE_DIR fmt/format.h REQUIRED)
set(TOPSPIN_FMT_FIRST_DIR ${CMAKE_BINARY_DIR}/fmt-first)
file(MAKE_DIRECTORY ${TOPSPIN_FMT_FIRST_DIR})
file(CREATE_LINK ${TOPSPIN_FMT_INCLUDE_DIR}/fmt ${TOPSPIN_FMT_FIRST_DIR}/fmt SYMBOLIC)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)

# xxhash ships no CMake config on Debian.
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
add_library(topspin_xxhash INTERFACE)
target_include_directories(topspin_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(topspin_xxhash INTERFACE ${XXHASH_LIBRARY})

find_package(benchmark QUIET)

set(TOPSPIN_HAVE_TORCH OFF)
if(NOT TOPSPIN_WITH_TORCH STREQUAL "OFF")
  topspin_find_venv_torch()
  # Caffe2's CUDA setup (a CUDA LibTorch) compiles probes: C++17 for nvcc
  # (CMake 3.25 knows no CUDA20 flags for it), and a fixed architecture
  # list so that no GPU needs to be visible (sm_80 A100, sm_90 H100/H200;
  # topspin has no kernels of its own).
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  if(TOPSPIN_WITH_TORCH STREQUAL "ON")
    find_package(Torch REQUIRED)
  else()
    find_package(Torch QUIET)
  endif()
  if(Torch_FOUND)
    set(TOPSPIN_HAVE_TORCH ON)
    message(STATUS "topspin: LibTorch ${Torch_VERSION} found; building model and train")
    if(Torch_VERSION VERSION_LESS 2.0)
      message(FATAL_ERROR "topspin needs LibTorch 2.x (found ${Torch_VERSION}); "
                          "scripts/install-deps.sh installs the pinned torch wheel into .venv/")
    endif()
    # A CUDA LibTorch: the device paths (streams, events, pinned memory,
    # NCCL) are compiled and linked, and run when a GPU is visible.
    set(TOPSPIN_TORCH_CUDA OFF)
    if(TARGET torch_cuda)
      set(TOPSPIN_TORCH_CUDA ON)
      get_filename_component(_site "${Torch_DIR}/../../../.." ABSOLUTE)
      find_path(TOPSPIN_NCCL_INCLUDE_DIR nccl.h
        HINTS "${_site}/nvidia/nccl/include" ${CUDAToolkit_INCLUDE_DIRS})
      message(STATUS "topspin: CUDA LibTorch; NCCL headers: ${TOPSPIN_NCCL_INCLUDE_DIR}")
    endif()
  else()
    message(STATUS "topspin: LibTorch not found; model and train are not built")
  endif()
endif()

# Parquet import: Arrow C++ from the pyarrow wheel (OFF: not built).
set(TOPSPIN_WITH_PARQUET AUTO CACHE STRING "Build Parquet import: AUTO, ON or OFF")
set(TOPSPIN_HAVE_PARQUET OFF)
if(NOT TOPSPIN_WITH_PARQUET STREQUAL "OFF")
  topspin_find_pyarrow()
  if(TOPSPIN_WITH_PARQUET STREQUAL "ON" AND NOT TOPSPIN_HAVE_PARQUET)
    message(FATAL_ERROR "TOPSPIN_WITH_PARQUET=ON but pyarrow's Arrow C++ was not found: run scripts/install-deps.sh")
  endif()
endif()

# zstd: Debian ships a CMake package; sentencepiece and PCRE2 only
# pkg-config files.
find_package(zstd REQUIRED)
if(TARGET zstd::libzstd_shared)
  add_library(topspin_zstd ALIAS zstd::libzstd_shared)
else()
  add_library(topspin_zstd ALIAS zstd::libzstd_static)
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# PCRE2 (8-bit, with its JIT on x86-64 and arm64): GPT-2's pre-tokenization
# pattern, with Unicode properties, for the gpt2:DIR tokenizer.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
