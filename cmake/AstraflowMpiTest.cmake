# astraflow_add_mpi_test(NAME <name> SOURCES <files...> MODULES <module...> [RANKS 1 2 4]
#                        [OSC sm ucx] [LIBS ...])
#
# Builds one GoogleTest binary linked with the shared MPI-aware main (tests/mpi_test_main.cpp)
# and registers it with ctest once per rank count (and once per osc component when OSC is
# given) as  mpiexec -n N --oversubscribe <binary>.  A test never relaunches itself.
#
# Tests are held to the layering as modules are (cmake/AstraflowModule.cmake): a test sees the
# public headers of the MODULES it names and of what they link, and the private headers
# (src/<m>/x.hpp, as "<m>/x.hpp") of those MODULES only — not src/ as a whole. Every module's
# code is linked (astraflow_symbols: symbols, no headers), so a test names what it includes, not
# what its callees need.
find_package(GTest REQUIRED)
add_library(astraflow_mpi_test_main STATIC ${CMAKE_SOURCE_DIR}/tests/mpi_test_main.cpp)
target_link_libraries(astraflow_mpi_test_main PUBLIC GTest::gtest PRIVATE astraflow_comm astraflow_options)

# What a test file may include: the modules it names (their public headers and their deps'),
# their private roots, and tests/ (the tests' own helpers).
function(astraflow_test_includes target)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  foreach(module IN LISTS ARGN)
    if(NOT TARGET astraflow_${module})
      message(FATAL_ERROR "${target}: MODULES names '${module}', which is no module")
    endif()
    target_link_libraries(${target} PRIVATE astraflow_${module})
    target_include_directories(${target} PRIVATE ${CMAKE_BINARY_DIR}/module_src/${module})
  endforeach()
endfunction()

# A test program: astraflow_test_includes, then every module's code and the config checks.
function(astraflow_test_setup target)
  astraflow_test_includes(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE astraflow_symbols astraflow_options)
endfunction()

function(astraflow_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;MODULES;RANKS;OSC;LIBS;LABELS" ${ARGN})
  if(NOT T_MODULES)
    message(FATAL_ERROR "astraflow_add_mpi_test(${T_NAME}): MODULES (the modules it tests) is required")
  endif()
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE astraflow_mpi_test_main ${T_LIBS})
  astraflow_test_setup(${T_NAME} ${T_MODULES})
  # Test code itself is not on any hot path (the work runs in the -O2 libraries): -O1 compiles
  # it in about two thirds of the time.
  target_compile_options(${T_NAME} PRIVATE $<$<CONFIG:Release>:-O1>)
  # In a unity batch GCC sees a test file's anonymous-namespace fixtures as a header's and warns
  # that the TEST_F classes derived from them have internal linkage, which they are meant to.
  target_compile_options(${T_NAME} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  set(oscs ${T_OSC})
  if(NOT oscs)
    set(oscs default)
  endif()
  foreach(n IN LISTS T_RANKS)
    foreach(osc IN LISTS oscs)
      set(test_name ${T_NAME}_np${n})
      set(mca_args)
      if(NOT osc STREQUAL "default")
        set(test_name ${test_name}_osc_${osc})
        set(mca_args --mca osc ${osc})
      endif()
      add_test(NAME ${test_name}
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} --oversubscribe ${mca_args}
                $<TARGET_FILE:${T_NAME}>
        WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
      set_tests_properties(${test_name} PROPERTIES
        TIMEOUT ${T_TIMEOUT} PROCESSORS 1 LABELS "mpi;${T_LABELS}"
        ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")
    endforeach()
  endforeach()
endfunction()
