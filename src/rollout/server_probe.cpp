// probeServerLogprobs: one sampled answer of an inference server scored by the policy's own model.
#include "rollout/server_probe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "astraflow/model/weight_blob.hpp"

namespace astraflow::rollout_detail {

ProbeResult probeServerLogprobs(HttpBackend& server, PolicyModelImpl& model, std::span<const std::byte> blob,
                                SamplingOptions options) {
  // A prompt of the first ids the policy may generate: any ids do, the check is of the arithmetic.
  const auto never = model.neverGenerate();
  std::vector<std::int32_t> prompt;
  for (std::int64_t id = 0; id < model.config().vocab_size && prompt.size() < 8; ++id)
    if (std::find(never.begin(), never.end(), id) == never.end()) prompt.push_back(static_cast<std::int32_t>(id));
  options.greedy = false;
  options.top_p = 1.0;  // the trainer scores under the temperature alone
  options.max_new_tokens = std::min(16, std::max(1, server.maxSequenceLength() - static_cast<int>(prompt.size())));
  options.min_new_tokens = 0;
  options.stop_token_ids.clear();
  const Generation g = server.generate({prompt}, options).front();
  ProbeResult r;
  if (g.failed || g.tokens.empty()) return r;

  // The bf16 bits the server's folder holds, as the trainer gets them: viewed in place by a bf16
  // CPU model (an http rank's), which then computes in bf16.
  if (canViewWeights(model))
    viewWeights(blob, model);
  else
    unpackWeights(blob, model);
  std::vector<std::int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), g.tokens.begin(), g.tokens.end());
  const auto n = static_cast<std::int64_t>(ids.size());
  torch::NoGradGuard no_grad;
  const torch::Tensor ours =
      sequenceLogProbs(model, torch::tensor(ids).view({1, n}), torch::tensor({n}), options.temperature)[0];
  r.ran = true;
  for (std::size_t i = 0; i < g.tokens.size(); ++i) {
    const double d = std::abs(ours[static_cast<std::int64_t>(prompt.size() + i)].item<float>() - g.logprobs[i]);
    r.mean_abs += d;
    r.max_abs = std::max(r.max_abs, d);
  }
  r.tokens = g.tokens.size();
  r.mean_abs /= static_cast<double>(r.tokens);
  return r;
}

}  // namespace astraflow::rollout_detail
