// Compiled only by the layering tests (tests/CMakeLists.txt): includes ASTRAFLOW_PROBE_HEADER
// in a target that links one module, to show which headers that module can reach.
#include ASTRAFLOW_PROBE_HEADER

int astraflowLayeringProbe() { return 0; }
