# Every third-party dependency comes from a Debian 12 package installed by scripts/setup.sh.
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

# HDF5: Debian's parallel build (libhdf5-openmpi-dev). Its pkg-config file carries the
# include dir and library of the Open MPI flavour; FindHDF5 would pick the serial one first.
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5-openmpi)
add_library(astraflow_hdf5 INTERFACE)
target_link_libraries(astraflow_hdf5 INTERFACE PkgConfig::HDF5)

# Kokkos (libtrilinos-kokkos-dev): the installed Kokkos::kokkos target lists
# <prefix>/include, which does not hold Kokkos_Core.hpp (it lives in include/trilinos).
# Point the target at the folder that does.
# The weight-delta codec (src/weights/delta_codec.cpp) is written with it.
find_package(Kokkos REQUIRED)
find_path(ASTRAFLOW_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp PATHS /usr/include/trilinos
          PATH_SUFFIXES trilinos REQUIRED)
set_target_properties(Kokkos::kokkos PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${ASTRAFLOW_KOKKOS_INCLUDE_DIR}")

# LibTorch (libtorch-dev, CPU build). Only files that touch tensors include its headers.
find_package(Torch REQUIRED)
add_library(astraflow_torch INTERFACE)
target_include_directories(astraflow_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(astraflow_torch INTERFACE ${TORCH_LIBRARIES})
