#pragma once
// Model weights in HDF5 (docs/architecture.md §10): one group per policy holding a `weights/` group
// with one float32 dataset per parameter (flattened, with a `shape` attribute "d0,d1,…"),
// and the model sizes as attributes, readable by h5py without astraflow.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/io/h5.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow {

void saveModelWeights(const io::H5Location& policy_group, const PolicyModelImpl& model);
// The same with parameter i's full value from value(i), called once per parameter in order.
void saveModelWeights(const io::H5Location& policy_group, const PolicyModelImpl& model,
                      const std::function<torch::Tensor(std::size_t)>& value);
// Refuses (Error naming the tensor) a checkpoint whose tensors do not match the model built
// from the config: unknown or missing tensor, or a different shape.
void loadModelWeights(const io::H5Location& policy_group, PolicyModelImpl& model);
// The model a policy group was saved from (its attributes), for export-hf; hf_path is the
// Hugging Face folder it was built from, if any. Throws Error naming a missing attribute.
ModelConfig modelConfigOf(const io::H5Location& policy_group);

// A file holding /policies/<name>/weights/… plus `format = astraflow-checkpoint` and
// `version` (weight version) attributes.
void saveCheckpointFile(const std::string& path, const std::string& policy, const PolicyModelImpl& model,
                        std::int64_t version);
// Several policies in one file (the warm start of a multi-policy workflow).
void saveCheckpointFile(const std::string& path,
                        const std::vector<std::pair<std::string, const PolicyModelImpl*>>& models,
                        std::int64_t version);
void loadCheckpointFile(const std::string& path, const std::string& policy, PolicyModelImpl& model);

}  // namespace astraflow
