# Warnings and code-generation options shared by every astraflow target (link it PRIVATE).
add_library(astraflow_options INTERFACE)
target_compile_options(astraflow_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wno-unused-parameter -Werror=return-type>)
