#pragma once
// `astraflow eval`: a trained policy evaluated without training (docs/tasks.md "Evaluation"), on
// the sets a run's rounds take (eval.problems of the held-out problems and eval.sets), with
// eval.samples answers at eval.temperature, through the in-process engine or the layout's
// inference server. One process, no MPI job.
#include <functional>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/eval_records.hpp"

namespace astraflow {

struct OfflineEvalOptions {
  std::string checkpoint;  // an astraflow checkpoint holding the config's (first) policy, or
  std::string hf_folder;   // a Hugging Face folder of that policy's shape (exactly one of the two)
  std::string out_dir;     // where eval.h5 goes (made when missing); empty: no table
  // Called after each batch of answers: answers done, answers in all.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

struct OfflineEvalResult {
  EvalRoundResult round;
  std::string backend;       // "engine" or the server's URL
  std::string weights;       // the checkpoint or folder evaluated
  std::string table;         // the eval.h5 written, or empty
  std::uint64_t failed = 0;  // answers a server could not give (scored 0, counted)
  double seconds = 0;

  std::string json() const;  // the one JSON object `astraflow eval` prints on stdout
};

// Error for a multi-agent config (a team is evaluated inside `astraflow run`), for neither or both
// of checkpoint and hf_folder, and for a server pool given a checkpoint (servers load folders).
OfflineEvalResult evaluateOffline(const Config& config, const OfflineEvalOptions& options);

}  // namespace astraflow
