#pragma once
#include "astraflow/core/config.hpp"
#include "astraflow/run/runtime.hpp"

namespace astraflow {

// Brings MPI and the roles up for a validated config and runs the job; returns the process
// exit code. Errors every rank meets alike end the run on all ranks with one message; an error
// on one rank alone aborts the job so that no rank is left waiting.
int runJob(int argc, char** argv, const Config& config, const RuntimeOptions& options);

}  // namespace astraflow
