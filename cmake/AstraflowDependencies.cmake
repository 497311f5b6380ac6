# Every third-party dependency comes from a Debian 12 package installed by scripts/setup.sh, but
# LibTorch, which comes from the torch wheel in the project's .venv (requirements.txt).
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
# HTTP server and client (src/http): Debian's cpp-httplib, built with OpenSSL, zlib and brotli;
# its pkg-config flags say so, and the header's class layouts depend on them.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# Boost.Beast (libboost-dev, header-only with Asio): the WebSocket client OpenEnv sessions run over
# (src/http/websocket.cpp). Debian's Boost 1.74 ships its CMake config.
find_package(Boost 1.74 REQUIRED CONFIG COMPONENTS headers)
# ICU (libicu-dev): the Unicode classes and normal forms of the tokenizer.json pipeline (src/text).
pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc)
# RE2 (libre2-dev): every pattern over model output, user files and config strings
# (core/text_pattern.hpp): linear time, no recursion, so no text can crash a rank.
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
# Oniguruma (libonig-dev): the regex engine of tokenizer.json patterns (src/text/onig_regex.hpp),
# the one the `tokenizers` library runs, so any Split or Replace pattern means what it means there.
pkg_check_modules(ONIG REQUIRED IMPORTED_TARGET oniguruma)
# GiNaC (libginac-dev, with CLN): the algebra of the `math` reward (src/tasks/math_equal.cpp) —
# exact rationals of any size, radicals, and an expression's difference reduced to zero.
pkg_check_modules(GINAC REQUIRED IMPORTED_TARGET ginac)
# OpenSSL 3's libcrypto (libssl-dev): HMAC-SHA256 (EVP_MAC) and nonces (RAND_bytes) of the
# authenticated cross-site link (src/comm/link_auth.cpp, docs/cross-site.md).
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto>=3.0)

# HDF5: Debian's parallel build (libhdf5-openmpi-dev). Its pkg-config file carries the
# include dir and library of the Open MPI flavour; FindHDF5 would pick the serial one first.
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5-openmpi)
add_library(astraflow_hdf5 INTERFACE)
target_link_libraries(astraflow_hdf5 INTERFACE PkgConfig::HDF5)

# LibTorch: the torch wheel's (scripts/setup.sh installs it into .venv), or a site's own
# (-DASTRAFLOW_TORCH_DIR=<a LibTorch or torch-package folder holding share/cmake/Torch>).
# Only files that touch tensors include its headers.
set(ASTRAFLOW_TORCH_DIR "" CACHE PATH "LibTorch to build with (default: the torch package in .venv)")
if(NOT ASTRAFLOW_TORCH_DIR)
  set(venv_python ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  if(NOT EXISTS ${venv_python})
    message(FATAL_ERROR "no .venv: run scripts/setup.sh (it installs the torch wheel), or point "
                        "-DASTRAFLOW_TORCH_DIR at a LibTorch")
  endif()
  execute_process(COMMAND ${venv_python} -W ignore -c "import os, torch; print(os.path.dirname(torch.__file__))"
                  OUTPUT_VARIABLE ASTRAFLOW_TORCH_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE torch_rc)
  if(NOT torch_rc EQUAL 0)
    message(FATAL_ERROR "the .venv has no importable torch: run scripts/setup.sh")
  endif()
endif()
# The CUDA build of LibTorch configures CUDA (its Caffe2 config runs enable_language(CUDA)): the
# toolkit under /usr/local/cuda serves when nvcc is not already known.
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
# Its checks compile a CUDA probe: CMake 3.25 knows no C++20 dialect flag for nvcc, and the
# GPU architectures are given rather than detected (a build machine may have no GPU).
if(NOT CMAKE_CUDA_STANDARD)
  set(CMAKE_CUDA_STANDARD 17)
endif()
if(NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
# The package folder goes first on the prefix path: TorchConfig's find_library calls search the
# prefix path before their own hints, and the system's directories next, so without it another
# LibTorch (Debian's libtorch-dev) could lend its libtorch.so and libc10.so.
list(PREPEND CMAKE_PREFIX_PATH ${ASTRAFLOW_TORCH_DIR})
# Torch_DIR is set, not searched, and TorchConfig's cached find_library results are dropped when
# they lie outside the folder: a build folder configured before against another LibTorch would
# otherwise keep its libraries.
set(Torch_DIR ${ASTRAFLOW_TORCH_DIR}/share/cmake/Torch CACHE PATH "TorchConfig.cmake's folder" FORCE)
foreach(lib IN ITEMS TORCH_LIBRARY c10_LIBRARY kineto_LIBRARY C10_CUDA_LIBRARY CAFFE2_NVRTC_LIBRARY)
  if(DEFINED CACHE{${lib}} AND NOT "$CACHE{${lib}}" MATCHES "^${ASTRAFLOW_TORCH_DIR}/")
    unset(${lib} CACHE)
  endif()
endforeach()
find_package(Torch REQUIRED CONFIG)
foreach(lib IN ITEMS TORCH_LIBRARY c10_LIBRARY)
  if(${lib} AND NOT ${lib} MATCHES "^${ASTRAFLOW_TORCH_DIR}/")
    message(FATAL_ERROR "LibTorch: ${lib} is ${${lib}}, outside ${ASTRAFLOW_TORCH_DIR}")
  endif()
endforeach()
message(STATUS "LibTorch ${Torch_VERSION} from ${ASTRAFLOW_TORCH_DIR}")
# The CPU library and c10: what every role links. CUDA (libtorch_cuda, NCCL, cuDNN) is loaded
# only by the CUDA plug-in (src/cuda, docs/gpu.md), so CPU runs never load it.
add_library(astraflow_torch INTERFACE)
target_include_directories(astraflow_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(astraflow_torch INTERFACE torch_cpu_library c10)

# Apache Arrow and Parquet's C++ libraries: prompt datasets as Parquet files and Hugging Face
# `datasets` Arrow files (src/tasks/table_reader.cpp). They come with the pyarrow wheel in .venv
# (requirements/build.txt: its include/ folder and libarrow.so.N, libparquet.so.N), as LibTorch
# comes with the torch wheel; -DASTRAFLOW_ARROW_DIR=<a pyarrow package folder> builds with another.
set(ASTRAFLOW_ARROW_DIR "" CACHE PATH "pyarrow package folder with include/arrow and libarrow.so.N (default: .venv's)")
if(NOT ASTRAFLOW_ARROW_DIR)
  foreach(python IN ITEMS ${CMAKE_SOURCE_DIR}/.venv/bin/python python3)
    execute_process(COMMAND ${python} -W ignore -c "import os, pyarrow; print(os.path.dirname(pyarrow.__file__))"
                    OUTPUT_VARIABLE arrow_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE arrow_rc ERROR_QUIET)
    if(arrow_rc EQUAL 0 AND EXISTS ${arrow_dir}/include/arrow/api.h)
      set(ASTRAFLOW_ARROW_DIR ${arrow_dir})
      break()
    endif()
  endforeach()
endif()
file(GLOB ASTRAFLOW_ARROW_LIB ${ASTRAFLOW_ARROW_DIR}/libarrow.so.[0-9]*)
file(GLOB ASTRAFLOW_PARQUET_LIB ${ASTRAFLOW_ARROW_DIR}/libparquet.so.[0-9]*)
if(NOT ASTRAFLOW_ARROW_DIR OR NOT ASTRAFLOW_ARROW_LIB OR NOT ASTRAFLOW_PARQUET_LIB)
  message(FATAL_ERROR "Arrow/Parquet C++ libraries not found: run scripts/setup.sh (it installs the pyarrow wheel "
                      "into .venv), or point -DASTRAFLOW_ARROW_DIR at a pyarrow package folder")
endif()
message(STATUS "Arrow and Parquet from ${ASTRAFLOW_ARROW_DIR}")
add_library(astraflow_arrow INTERFACE)
target_include_directories(astraflow_arrow SYSTEM INTERFACE ${ASTRAFLOW_ARROW_DIR}/include)
target_link_libraries(astraflow_arrow INTERFACE ${ASTRAFLOW_PARQUET_LIB} ${ASTRAFLOW_ARROW_LIB})

# c10d's Gloo process group (trainer.grad_sync: c10d on the CPU). LibTorch has Gloo compiled in
# but ships no Gloo headers, and ProcessGroupGloo.hpp includes some: Debian's libgloo-dev gives
# them. Only its declarations are used (no Gloo type is built or laid out on our side), so its
# older snapshot serves.
find_path(ASTRAFLOW_GLOO_INCLUDE_DIR gloo/rendezvous/store.h)
if(NOT ASTRAFLOW_GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "Gloo headers (gloo/rendezvous/store.h) not found: install libgloo-dev (scripts/setup.sh)")
endif()
add_library(astraflow_c10d_gloo INTERFACE)
target_include_directories(astraflow_c10d_gloo SYSTEM INTERFACE ${ASTRAFLOW_GLOO_INCLUDE_DIR})
target_compile_definitions(astraflow_c10d_gloo INTERFACE USE_C10D_GLOO)

# The CUDA plug-in's libraries: present in a CUDA build of LibTorch (the wheel's), absent in a
# CPU-only one, which then builds no plug-in and refuses device: cuda at start.
set(ASTRAFLOW_TORCH_CUDA_LIB ${ASTRAFLOW_TORCH_DIR}/lib/libtorch_cuda.so)
set(ASTRAFLOW_HAVE_TORCH_CUDA OFF)
if(EXISTS ${ASTRAFLOW_TORCH_CUDA_LIB} AND EXISTS ${ASTRAFLOW_TORCH_DIR}/lib/libc10_cuda.so)
  # The wheel's CUDA headers and NCCL sit beside torch in site-packages (nvidia/*); a site's
  # LibTorch uses its CUDA toolkit's.
  get_filename_component(site_packages ${ASTRAFLOW_TORCH_DIR} DIRECTORY)
  find_path(ASTRAFLOW_CUDA_INCLUDE_DIR cuda_runtime_api.h
            PATHS ${site_packages}/nvidia/cu13/include ${site_packages}/nvidia/cuda_runtime/include
                  /usr/local/cuda/include NO_DEFAULT_PATH)
  find_path(ASTRAFLOW_NCCL_INCLUDE_DIR nccl.h PATHS ${site_packages}/nvidia/nccl/include /usr/local/cuda/include
            NO_DEFAULT_PATH)
  if(ASTRAFLOW_CUDA_INCLUDE_DIR AND ASTRAFLOW_NCCL_INCLUDE_DIR)
    set(ASTRAFLOW_HAVE_TORCH_CUDA ON)
    file(GLOB ASTRAFLOW_NVIDIA_LIB_DIRS LIST_DIRECTORIES true ${site_packages}/nvidia/*/lib)
    message(STATUS "CUDA plug-in: LibTorch CUDA libraries found; headers ${ASTRAFLOW_CUDA_INCLUDE_DIR}")
  endif()
endif()
if(NOT ASTRAFLOW_HAVE_TORCH_CUDA)
  message(STATUS "CUDA plug-in: not built (CPU-only LibTorch or no CUDA/NCCL headers); device: cuda is refused")
endif()
# LibTorch's include folder bundles its own fmt (12.x). Every TU must see one fmt, the one the
# Debian spdlog and libfmt.so were built with (9.x), whatever include order LibTorch's folder
# gets: a folder of our own holding only a link to Debian's fmt headers goes on every module's
# path ahead of it (-I before -isystem). LibTorch's own headers that include fmt (the c10d
# logging ones, none that torch/torch.h pulls in) see Debian's fmt too.
get_target_property(fmt_include_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
find_path(ASTRAFLOW_FMT_INCLUDE_DIR fmt/format.h PATHS ${fmt_include_dirs} NO_DEFAULT_PATH)
if(NOT ASTRAFLOW_FMT_INCLUDE_DIR)
  find_path(ASTRAFLOW_FMT_INCLUDE_DIR fmt/format.h REQUIRED)
endif()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fmt_first)
file(CREATE_LINK ${ASTRAFLOW_FMT_INCLUDE_DIR}/fmt ${CMAKE_BINARY_DIR}/fmt_first/fmt SYMBOLIC)
add_library(astraflow_fmt_first INTERFACE)
target_include_directories(astraflow_fmt_first INTERFACE ${CMAKE_BINARY_DIR}/fmt_first)
