# astraflow_module(<name> [DEPS <module>...] [PUBLIC_LIBS <target>...] [PRIVATE_LIBS <target>...]
#                  [EXCLUDE <file name>...])
#
# One static library per module folder: src/<name>/*.cpp (but the EXCLUDEd names) compiled into
# astraflow_<name>.
# The layering in docs/architecture.md is enforced by the include path, not by review: a module
# sees the public headers (include/astraflow/<m>/) only of itself and of the modules it links,
# because each module gets its own include root in the build tree holding nothing but a link
#   <build>/module_include/<name>/astraflow/<name>  ->  include/astraflow/<name>
# and that root propagates only along target_link_libraries. Its private headers (src/<name>/*.hpp,
# included as "<name>/x.hpp") are on its own PRIVATE path only, through
#   <build>/module_src/<name>/<name>  ->  src/<name>
# So `#include "astraflow/rollout/…"` in src/trainer fails to compile: no such file.
function(astraflow_module name)
  cmake_parse_arguments(M "" "" "DEPS;PUBLIC_LIBS;PRIVATE_LIBS;EXCLUDE" ${ARGN})
  set(public_root ${CMAKE_BINARY_DIR}/module_include/${name})
  set(private_root ${CMAKE_BINARY_DIR}/module_src/${name})
  file(MAKE_DIRECTORY ${public_root}/astraflow ${private_root})
  if(EXISTS ${CMAKE_SOURCE_DIR}/include/astraflow/${name})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/include/astraflow/${name} ${public_root}/astraflow/${name} SYMBOLIC)
  endif()
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${name} ${private_root}/${name} SYMBOLIC)

  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  foreach(excluded IN LISTS M_EXCLUDE)
    list(REMOVE_ITEM sources ${CMAKE_SOURCE_DIR}/src/${name}/${excluded})
  endforeach()
  add_library(astraflow_${name} STATIC ${sources})
  target_include_directories(astraflow_${name} PUBLIC ${public_root} PRIVATE ${private_root})
  foreach(dep IN LISTS M_DEPS)
    target_link_libraries(astraflow_${name} PUBLIC astraflow_${dep})
  endforeach()
  target_link_libraries(astraflow_${name} PUBLIC ${M_PUBLIC_LIBS} PRIVATE astraflow_options ${M_PRIVATE_LIBS})
  set_target_properties(astraflow_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY ASTRAFLOW_MODULES ${name})
endfunction()
