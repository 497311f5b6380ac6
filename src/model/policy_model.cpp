// PolicyModelImpl: the Qwen3 / Qwen2 / Llama decoder (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU)
// with full, KV-cached and paged forwards, parameters imported and exported by name, and sequenceLogProbs.
#include "astraflow/model/policy_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "astraflow/core/error.hpp"
#include "astraflow/model/finite_values.hpp"
#include "model/autocast_guards.hpp"
#include "model/packed_linear.hpp"
#include "model/paged_attention.hpp"

namespace astraflow {

namespace {

// In float32 whatever the activations' dtype (as Hugging Face's Qwen/Llama RMSNorm), then back.
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const auto xf = x.to(torch::kFloat32);
  const auto variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  return (xf * torch::rsqrt(variance + eps)).to(x.scalar_type()) * weight;
}

// Rotary embedding, "rotate half" convention (Qwen/Llama): pairs dimension i with i + d/2.
torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  const auto x1 = x.narrow(-1, 0, half);
  const auto x2 = x.narrow(-1, half, half);
  const auto rotated = torch::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

// Inverse rotary frequencies [head_dim/2] in float32: theta^(-2i/d) computed in float64 and
// rounded once (transformers computes it in float32 arithmetic; the two differ by at most an ulp
// or so, far inside the log-prob tolerance its tests hold us to), then scaled as transformers
// does: `linear` divides every frequency by the factor; `llama3` divides the low frequencies,
// keeps the high ones and interpolates between.
torch::Tensor rotaryInverseFrequencies(const ModelConfig& m) {
  const auto hd = m.headDim();
  auto inv_freq = torch::pow(m.rope_theta, -torch::arange(0, hd, 2, torch::kFloat64) / hd).to(torch::kFloat32);
  const RopeScaling& s = m.rope_scaling;
  switch (s.kind) {
    case RopeScaling::Kind::None: break;
    case RopeScaling::Kind::Linear: inv_freq = inv_freq / s.factor; break;
    case RopeScaling::Kind::Llama3: {
      const double old_len = s.original_max_position_embeddings;
      const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
      const auto wavelen = 2 * M_PI / inv_freq;
      auto scaled = torch::where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq);
      const auto smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
      const auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
      inv_freq = torch::where(medium, smoothed, scaled);
      break;
    }
  }
  return inv_freq;
}

std::string shapeOf(const torch::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

}  // namespace

PolicyModelImpl::PolicyModelImpl(const ModelConfig& config, bool uninitialised) : config_(config) {
  if (config_.vocab_size <= 0) throw Error("model: vocab_size must be set (from the tokenizer) before building");
  const auto D = config_.d_model, H = config_.heads, KV = config_.kv_heads, hd = config_.headDim();
  const auto F = config_.ffn_hidden, V = config_.vocab_size;
  auto param = [&](const std::string& name, torch::Tensor init) {
    // LibTorch forbids dots in registered names; the transfer/checkpoint name keeps them.
    std::string registered = name;
    std::replace(registered.begin(), registered.end(), '.', '_');
    auto p = register_parameter(registered, std::move(init));
    ordered_.push_back({name, p});
    shapes_.push_back(p.sizes().vec());
    return p;
  };
  // A model from a Hugging Face folder gets its weights from the folder next (importTensors):
  // drawing random ones first would cost seconds for a large model.
  const bool draw = config_.hf_path.empty() && !uninitialised;
  auto normal = [&](torch::IntArrayRef shape, double init_std) {
    return draw ? torch::randn(shape) * init_std : torch::empty(shape);
  };
  // A linear layer's weight [out, in] and, when `bias`, its bias [out] (zero-initialised).
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, double init_std, bool bias,
                    torch::Tensor& weight, torch::Tensor& bias_out) {
    weight = param(name + ".weight", normal({out, in}, init_std));
    if (bias) bias_out = param(name + ".bias", torch::zeros({out}));
  };
  // Hugging Face's parameter names and state_dict order, so checkpoints in and out need no
  // mapping. GPT-2-style init: N(0, 0.02), output projections scaled by 1/sqrt(2·layers).
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * config_.layers);
  embed_ = param("model.embed_tokens.weight", normal({V, D}, std));
  for (int l = 0; l < config_.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    Layer L;
    linear(p + "self_attn.q_proj", H * hd, D, std, config_.qkvBias(), L.q, L.q_bias);
    linear(p + "self_attn.k_proj", KV * hd, D, std, config_.qkvBias(), L.k, L.k_bias);
    linear(p + "self_attn.v_proj", KV * hd, D, std, config_.qkvBias(), L.v, L.v_bias);
    linear(p + "self_attn.o_proj", D, H * hd, out_std, config_.oBias(), L.o, L.o_bias);
    if (config_.qkNorm()) {
      L.q_norm = param(p + "self_attn.q_norm.weight", torch::ones({hd}));
      L.k_norm = param(p + "self_attn.k_norm.weight", torch::ones({hd}));
    }
    linear(p + "mlp.gate_proj", F, D, std, config_.mlp_bias, L.gate, L.gate_bias);
    linear(p + "mlp.up_proj", F, D, std, config_.mlp_bias, L.up, L.up_bias);
    linear(p + "mlp.down_proj", D, F, out_std, config_.mlp_bias, L.down, L.down_bias);
    L.attn_norm = param(p + "input_layernorm.weight", torch::ones({D}));
    L.mlp_norm = param(p + "post_attention_layernorm.weight", torch::ones({D}));
    layers_.push_back(L);
  }
  final_norm_ = param("model.norm.weight", torch::ones({D}));
  if (!config_.tied_embeddings) lm_head_ = param("lm_head.weight", normal({V, D}, std));
  inv_freq_ = rotaryInverseFrequencies(config_);
}

KvCache PolicyModelImpl::newCache(std::int64_t batch, std::int64_t capacity) const {
  KvCache c;
  c.capacity = capacity;
  for (int l = 0; l < config_.layers; ++l) {
    c.keys.push_back(torch::zeros({batch, config_.kv_heads, capacity, config_.headDim()}, embed_.options()));
    c.values.push_back(torch::zeros({batch, config_.kv_heads, capacity, config_.headDim()}, embed_.options()));
  }
  c.key_valid = torch::zeros({batch, capacity}, embed_.options().dtype(torch::kBool));
  return c;
}

torch::Tensor PolicyModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                                       const torch::Tensor& valid, const Segments& segments) {
  return run(tokens, positions, valid, segments, nullptr);
}

torch::Tensor PolicyModelImpl::forwardCached(const torch::Tensor& tokens, const torch::Tensor& positions,
                                             const torch::Tensor& valid, KvCache& cache) {
  return run(tokens, positions, valid, {}, &cache);
}

torch::Tensor PolicyModelImpl::forwardPaged(const torch::Tensor& tokens, const torch::Tensor& positions,
                                            const torch::Tensor& valid, const PagedKv& kv) {
  return run(tokens, positions, valid, {}, nullptr, &kv);
}

// The attention input of a forward (attention_input.hpp): a full forward with SDPA needs no mask
// where its rows are right-padded, and attends per span where they are packed or padded in front;
// otherwise the mask in the form block() takes: [B,1,group*T,K] (bool, or additive for eager
// attention), or [B,K] bool when the step attends over the KV pool in place.
AttentionInput PolicyModelImpl::attentionInput(const torch::Tensor& positions, const torch::Tensor& valid,
                                               const Segments& segments, KvCache* cache, const PagedKv* paged) const {
  if (!cache && !paged && config_.attention == AttentionKind::Sdpa && !explicit_mask_) {
    if (!segments.defined() && rightPadded(valid)) return {AttentionForm::Causal, {}, {}};
    auto spans = attentionSpans(valid, segments.id, segments.sees);
    if (spans.defined()) return {AttentionForm::Spans, {}, std::move(spans)};
  }
  const auto B = positions.size(0), T = positions.size(1);
  const auto group = config_.heads / config_.kv_heads;
  const std::int64_t past = cache ? cache->length : 0;
  // Which keys [0, past+T) a new query i sees: key j when j <= past + i and key j is valid.
  torch::Tensor key_valid;  // a paged view carries its own
  if (cache) {
    cache->key_valid.narrow(1, past, T).copy_(valid);
    key_valid = cache->key_valid.narrow(1, 0, past + T);
  } else {
    key_valid = valid;
  }
  const auto long_opts = positions.options().dtype(torch::kLong);
  torch::Tensor allowed;  // [B,1,T,K]
  std::int64_t K_all = past + T;
  // A one-position paged step on the CPU attends over the pool in place (paged_attention.cpp),
  // taking the [B,K] mask as it is.
  const bool direct = inPlacePagedDecode(paged, T);
  if (paged) {
    // By position: a row's keys are its own slots, in any order; its first key (position 0) is
    // always visible, so no query (a padding one included, at position 0) is left without a key.
    K_all = paged->key_valid.size(1);
    allowed = (paged->key_positions.unsqueeze(1) <= positions.unsqueeze(2)) & paged->key_valid.unsqueeze(1);
    allowed = allowed.unsqueeze(1);
  } else {
    const auto q_idx = torch::arange(T, long_opts).unsqueeze(1) + past;                          // [T,1]
    const auto k_idx = torch::arange(past + T, long_opts).unsqueeze(0);                          // [1,K]
    allowed = (k_idx <= q_idx).unsqueeze(0).unsqueeze(0) & key_valid.unsqueeze(1).unsqueeze(1);  // [B,1,T,K]
    if (segments.defined()) {
      if (cache) throw Error("model: packed segments are for the full forward, not the KV-cache one");
      auto same = segments.id.unsqueeze(2) == segments.id.unsqueeze(1);  // [B,T(q),T(k)]
      if (segments.sees.defined()) same = same | (segments.sees.unsqueeze(2) == segments.id.unsqueeze(1));
      allowed = allowed & same.unsqueeze(1);
    }
    // A query with no visible key (a padding query) would give NaN; let it see itself.
    const auto self = (k_idx == q_idx).unsqueeze(0).unsqueeze(0);
    allowed = torch::where(allowed.any(-1, true), allowed, self);
  }

  // The query heads sharing one KV head are stacked along the query axis ([B,KV,group*T,hd]),
  // so K and V are used as they are (no per-head repeat): the mask repeats instead,
  // [B,1,group*T,K].
  const auto allowed_g = direct
                             ? allowed.reshape({B, K_all})
                             : allowed.unsqueeze(2).expand({B, 1, group, T, K_all}).reshape({B, 1, group * T, K_all});
  torch::Tensor additive_g;  // eager attention's form of the mask
  if (config_.attention == AttentionKind::Eager && !direct) {
    additive_g = torch::zeros(allowed_g.sizes(), embed_.options())
                     .masked_fill(allowed_g.logical_not(), -std::numeric_limits<float>::infinity());
  }

  if (direct) return {AttentionForm::PagedInPlace, allowed_g, {}};
  return {AttentionForm::Mask, config_.attention == AttentionKind::Eager ? additive_g : allowed_g, {}};
}

torch::Tensor PolicyModelImpl::run(const torch::Tensor& tokens, const torch::Tensor& positions,
                                   const torch::Tensor& valid, const Segments& segments, KvCache* cache,
                                   const PagedKv* paged) {
  auto x = trunk(tokens, positions, valid, segments, cache, paged);
  // The logits a paged caller samples from, not a [B,T,V] block for every prompt position.
  if (paged && paged->logits_at.defined()) {
    x = x.gather(1, paged->logits_at.view({x.size(0), 1, 1}).expand({x.size(0), 1, x.size(2)}));
  }
  x = rmsNorm(x, final_norm_, config_.rms_eps);
  auto logits = linearOf(0, Product::Head, x, outputWeight(), torch::Tensor()).to(torch::kFloat32);
  // Tokens the policy may never emit (<pad>, <bos>) get probability 0 here and in
  // chunkedTokenLogProbs (outputHead), the places both the engine and the trainer go through, so
  // their distributions stay identical.
  if (never_generate_.defined()) {
    logits = logits.index_fill(-1, never_generate_, -std::numeric_limits<float>::infinity());
  }
  return logits;
}

torch::Tensor PolicyModelImpl::hiddenStates(const torch::Tensor& tokens, const torch::Tensor& positions,
                                            const torch::Tensor& valid, const Segments& segments) {
  return rmsNorm(trunk(tokens, positions, valid, segments, nullptr, nullptr), final_norm_, config_.rms_eps);
}

OutputHead PolicyModelImpl::outputHead(double temperature) const {
  return OutputHead{outputWeight(), never_generate_, temperature, {}};
}

std::pair<torch::Tensor, OutputHead> PolicyModelImpl::hiddenStatesAndHead(const torch::Tensor& tokens,
                                                                          const torch::Tensor& positions,
                                                                          const torch::Tensor& valid,
                                                                          const Segments& segments,
                                                                          double temperature) {
  OutputHead head = outputHead(temperature);
  if (config_.tied_embeddings && torch::GradMode::is_enabled() && embed_.requires_grad())
    head.tied = c10::make_intrusive<TiedGradient>();
  auto hidden =
      rmsNorm(trunk(tokens, positions, valid, segments, nullptr, nullptr, head.tied), final_norm_, config_.rms_eps);
  return {std::move(hidden), std::move(head)};
}

torch::Tensor PolicyModelImpl::trunk(const torch::Tensor& tokens, const torch::Tensor& positions,
                                     const torch::Tensor& valid, const Segments& segments, KvCache* cache,
                                     const PagedKv* paged, const c10::intrusive_ptr<TiedGradient>& tied) {
  const auto T = tokens.size(1);
  const std::int64_t past = cache ? cache->length : 0;
  if (cache && past + T > cache->capacity) {
    throw Error(fmt::format("model: KV cache of {} positions cannot take {} more after {}", cache->capacity, T, past));
  }
  // The context limit is on positions (padding columns do not count).
  if (positions.numel() > 0 && positions.max().item<std::int64_t>() >= config_.max_seq_len) {
    throw Error(fmt::format("model: position {} is beyond model.max_seq_len {}", positions.max().item<std::int64_t>(),
                            config_.max_seq_len));
  }

  // Rotary angles per token: [B,1,T,hd], computed in float32 and used in the activations' dtype.
  const auto dtype = embed_.scalar_type();
  const auto angles = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq_;  // [B,T,hd/2]
  const auto emb = torch::cat({angles, angles}, -1).unsqueeze(1);
  const auto cos = emb.cos().to(dtype), sin = emb.sin().to(dtype);

  const AttentionInput attention = attentionInput(positions, valid, segments, cache, paged);
  auto x = tiedEmbedding(embed_, tokens, tied);  // [B,T,D]; torch::embedding without a tied slot
  // Checkpointing only where there is a backward pass to recompute for.
  const bool backward = !cache && !paged && torch::GradMode::is_enabled();
  const bool checkpoint = checkpoint_blocks_ && backward;
  std::optional<NoCastCache> no_cache;  // sharded weights are gathered anew for every use
  if (shards_) no_cache.emplace();
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    if (shards_ && backward) {
      x = shardedBlock(*this, *shards_, l, x, cos, sin, attention);
    } else if (shards_) {
      shards_->gather(l);
      x = block(l, x, cos, sin, attention, cache, paged);
      shards_->release(l);
    } else {
      x = checkpoint ? checkpointedBlock(*this, l, x, cos, sin, attention)
                     : block(l, x, cos, sin, attention, cache, paged);
    }
  }
  no_cache.reset();
  if (cache) cache->length = past + T;
  return x;
}

torch::Tensor PolicyModelImpl::block(std::size_t l, const torch::Tensor& x_in, const torch::Tensor& cos,
                                     const torch::Tensor& sin, const AttentionInput& attention, KvCache* cache,
                                     const PagedKv* paged) const {
  const auto B = x_in.size(0), T = x_in.size(1);
  const auto H = config_.heads, KV = config_.kv_heads, hd = config_.headDim(), group = H / KV;
  const std::int64_t past = cache ? cache->length : 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const Layer& L = layers_[l];
  auto x = x_in;
  auto h = rmsNorm(x, L.attn_norm, config_.rms_eps);
  // An undefined bias is no bias (torch::linear skips it).
  torch::Tensor q, k, v;
  if (const auto* packed = packedFor(l, Product::Qkv, h)) {
    const auto qkv = packed->apply(h);  // [B,T,(H+2KV)·hd]
    q = qkv.narrow(-1, 0, H * hd);
    k = qkv.narrow(-1, H * hd, KV * hd);
    v = qkv.narrow(-1, (H + KV) * hd, KV * hd);
  } else {
    q = torch::linear(h, L.q, L.q_bias);
    k = torch::linear(h, L.k, L.k_bias);
    v = torch::linear(h, L.v, L.v_bias);
  }
  q = q.reshape({B, T, H, hd}).transpose(1, 2);   // [B,H,T,hd]
  k = k.reshape({B, T, KV, hd}).transpose(1, 2);  // [B,KV,T,hd]
  v = v.reshape({B, T, KV, hd}).transpose(1, 2);
  if (config_.qkNorm()) {
    q = rmsNorm(q, L.q_norm, config_.rms_eps);
    k = rmsNorm(k, L.k_norm, config_.rms_eps);
  }
  q = applyRope(q, cos, sin);
  k = applyRope(k, cos, sin);
  if (cache) {
    cache->keys[l].narrow(2, past, T).copy_(k);
    cache->values[l].narrow(2, past, T).copy_(v);
    k = cache->keys[l].narrow(2, 0, past + T);
    v = cache->values[l].narrow(2, 0, past + T);
  } else if (paged) {
    // New K/V into their slots, then every row's keys gathered from its slots: one copy of the
    // row's context per layer and step (the price of memory that grows with live tokens only).
    paged->keys[l].index_copy_(0, paged->write_slots, k.transpose(1, 2).reshape({B * T, KV, hd}));
    paged->values[l].index_copy_(0, paged->write_slots, v.transpose(1, 2).reshape({B * T, KV, hd}));
    const auto K = paged->key_valid.size(1);
    if (attention.form == AttentionForm::PagedInPlace) {  // inPlacePagedDecode chose it: a [B,K] mask
      const auto attended = pagedDecodeAttention(q.select(2, 0), paged->keys[l], paged->values[l],
                                                 paged->read_slots.view({B, K}), attention.mask, scale);  // [B,H,hd]
      return mlp(l, x + linearOf(l, Product::O, attended.reshape({B, 1, H * hd}), L.o, L.o_bias));
    }
    k = paged->keys[l].index_select(0, paged->read_slots).view({B, K, KV, hd}).transpose(1, 2);
    v = paged->values[l].index_select(0, paged->read_slots).view({B, K, KV, hd}).transpose(1, 2);
  }
  if (attention.form == AttentionForm::Causal || attention.form == AttentionForm::Spans) {
    // No mask: the fused kernels (flash on CUDA and CPU) keep O(T) per query row, not [T,K].
    const auto attended = attention.form == AttentionForm::Causal
                              ? at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, scale,
                                                                 /*enable_gqa=*/group > 1)
                              : spanAttention(q, k, v, attention.spans, scale);  // [B,H,T,hd]
    return mlp(l, x + linearOf(l, Product::O, attended.transpose(1, 2).reshape({B, T, H * hd}), L.o, L.o_bias));
  }
  const auto& mask = attention.mask;
  const auto qg = q.reshape({B, KV, group * T, hd});
  torch::Tensor out;  // [B,KV,group*T,hd]
  if (config_.attention == AttentionKind::Sdpa) {
    // LibTorch picks the kernel for the device (a fused one where the mask allows).
    out = at::scaled_dot_product_attention(qg, k, v, mask, /*dropout_p=*/0.0, /*is_causal=*/false, scale);
  } else {
    const auto scores = torch::matmul(qg, k.transpose(-1, -2)) * scale + mask;  // [B,KV,group*T,K]
    out = torch::matmul(torch::softmax(scores, -1), v);
  }
  // reshape, not view: a fused CUDA kernel may return [B,KV,group*T,hd] in another layout.
  out = out.reshape({B, H, T, hd}).transpose(1, 2).reshape({B, T, H * hd});
  return mlp(l, x + linearOf(l, Product::O, out, L.o, L.o_bias));
}

// Measured (docs/performance.md): reading keys in place pays when the gather would copy mostly
// padding — rows of unequal length padded to the longest (1.08x on a long tail) — and costs
// 7-9 % where the rows are about as long as each other (batch 64 of equal 48-token contexts),
// where the dense copy feeds one batched attention kernel better than per-row loops. So: in
// place when fewer than half the gathered key slots are a row's own.
bool PolicyModelImpl::inPlacePagedDecode(const PagedKv* paged, std::int64_t positions_per_row) const {
  if (!paged || !in_place_paged_decode_ || paged->keys.empty() ||
      !pagedDecodeAttentionApplies(paged->keys[0], positions_per_row)) {
    return false;
  }
  return force_in_place_paged_decode_ || 2 * paged->key_valid.sum().item<std::int64_t>() < paged->key_valid.numel();
}

torch::Tensor PolicyModelImpl::mlp(std::size_t l, const torch::Tensor& x) const {
  const Layer& L = layers_[l];
  const auto h = rmsNorm(x, L.mlp_norm, config_.rms_eps);
  torch::Tensor act;
  if (const auto* packed = packedFor(l, Product::GateUp, h)) {
    const auto gate_up = packed->apply(h);  // [..., 2F]
    const auto F = L.gate.size(0);
    act = torch::silu(gate_up.narrow(-1, 0, F)) * gate_up.narrow(-1, F, F);
  } else {
    act = torch::silu(torch::linear(h, L.gate, L.gate_bias)) * torch::linear(h, L.up, L.up_bias);
  }
  return x + linearOf(l, Product::Down, act, L.down, L.down_bias);
}

std::vector<torch::Tensor> PolicyModelImpl::blockParameters(std::size_t l) const {
  const Layer& L = layers_[l];
  std::vector<torch::Tensor> out;
  for (const torch::Tensor* t :
       {&L.attn_norm, &L.q, &L.k, &L.v, &L.o, &L.q_norm, &L.k_norm, &L.mlp_norm, &L.gate, &L.up, &L.down, &L.q_bias,
        &L.k_bias, &L.v_bias, &L.o_bias, &L.gate_bias, &L.up_bias, &L.down_bias}) {
    if (t->defined()) out.push_back(*t);
  }
  return out;
}

std::vector<NamedTensor> PolicyModelImpl::orderedParameters() const { return ordered_; }

std::vector<NamedTensor> PolicyModelImpl::exportBf16() const {
  if (shards_) throw Error("model: exportBf16 of a parameter-sharded model (the trainer packs from the shards)");
  torch::NoGradGuard no_grad;
  std::vector<NamedTensor> out;
  out.reserve(ordered_.size());
  // To the host: the weight store packs from host memory (one device→host copy per tensor).
  for (const auto& p : ordered_) {
    out.push_back({p.name, p.tensor.detach().to(torch::kCPU, torch::kBFloat16).contiguous()});
  }
  return out;
}

std::vector<std::size_t> PolicyModelImpl::matchTensors(const std::vector<NamedTensor>& tensors) const {
  std::vector<std::size_t> index;
  index.reserve(tensors.size());
  std::vector<bool> given(ordered_.size(), false);
  for (const auto& t : tensors) {
    auto it = std::find_if(ordered_.begin(), ordered_.end(), [&](const NamedTensor& p) { return p.name == t.name; });
    if (it == ordered_.end()) throw Error(fmt::format("weights: tensor '{}' is not a parameter of this model", t.name));
    const auto idx = static_cast<std::size_t>(it - ordered_.begin());
    if (given[idx]) throw Error(fmt::format("weights: tensor '{}' is given twice", t.name));
    if (!parameterShape(idx).equals(t.tensor.sizes())) {
      throw Error(fmt::format("weights: tensor '{}' has shape {} but the model (from the config) expects [{}]", t.name,
                              shapeOf(t.tensor), fmt::join(parameterShape(idx), ", ")));
    }
    given[idx] = true;
    index.push_back(idx);
  }
  for (std::size_t i = 0; i < ordered_.size(); ++i) {
    if (!given[i]) throw Error(fmt::format("weights: tensor '{}' is missing", ordered_[i].name));
  }
  return index;
}

void PolicyModelImpl::checkFinite(const NamedTensor& t) {
  if (!allFinite(t.tensor)) {  // no full-size temporaries (finite_values.hpp)
    throw Error(fmt::format("weights: tensor '{}' holds NaN or inf values", t.name));
  }
}

void PolicyModelImpl::copyInto(std::size_t index, const torch::Tensor& source) {
  torch::NoGradGuard no_grad;
  if (shards_) {
    shards_->load(index, source);
    return;
  }
  ordered_[index].tensor.copy_(source);  // converts the dtype, no temporary
}

void PolicyModelImpl::importTensors(const std::vector<NamedTensor>& tensors) {
  // Validate everything first: a refused import must leave the model untouched.
  const auto index = matchTensors(tensors);
  for (const auto& t : tensors) checkFinite(t);
  for (std::size_t i = 0; i < tensors.size(); ++i) copyInto(index[i], tensors[i].tensor);
}

void PolicyModelImpl::adoptTensors(const std::vector<NamedTensor>& tensors) {
  if (shards_) throw Error("weights: a parameter-sharded model cannot adopt whole tensors");
  const auto index = matchTensors(tensors);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& p = ordered_[index[i]].tensor;
    const auto& t = tensors[i].tensor;
    if (t.scalar_type() != p.scalar_type() || t.device() != p.device() || !t.is_contiguous()) {
      throw Error(fmt::format("weights: tensor '{}' is {} on {}, its parameter {} on {}", tensors[i].name,
                              c10::toString(t.scalar_type()), t.device().str(), c10::toString(p.scalar_type()),
                              p.device().str()));
    }
    checkFinite(tensors[i]);
  }
  torch::NoGradGuard no_grad;
  // set_data swaps the storage under the same parameter object: the handles the layers hold follow.
  for (std::size_t i = 0; i < tensors.size(); ++i) ordered_[index[i]].tensor.set_data(tensors[i].tensor);
}

void PolicyModelImpl::setNeverGenerate(const std::vector<std::int64_t>& token_ids) {
  never_generate_ = token_ids.empty() ? torch::Tensor() : torch::tensor(token_ids, torch::kLong).to(embed_.device());
}

std::vector<std::int64_t> PolicyModelImpl::neverGenerate() const {
  if (!never_generate_.defined()) return {};
  const auto ids = never_generate_.to(torch::kCPU);
  return {ids.data_ptr<std::int64_t>(), ids.data_ptr<std::int64_t>() + ids.numel()};
}

void PolicyModelImpl::place(const torch::Device& device, torch::ScalarType dtype) {
  // Module::to swaps each parameter's data in place (set_data), so the handles in layers_ and
  // ordered_ stay those parameters.
  to(device, dtype);
  inv_freq_ = inv_freq_.to(device);  // stays float32: the angles are computed in float32
  if (never_generate_.defined()) never_generate_ = never_generate_.to(device);
}

void PolicyModelImpl::placeUninitialised(const torch::Device& device, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  for (auto& p : ordered_) p.tensor.set_data(torch::empty(p.tensor.sizes(), options));
  inv_freq_ = inv_freq_.to(device);
  if (never_generate_.defined()) never_generate_ = never_generate_.to(device);
}

std::int64_t PolicyModelImpl::parameterCount() const {
  std::int64_t n = 0;
  for (const auto& shape : shapes_) n += c10::multiply_integers(shape);
  return n;
}

std::pair<torch::Tensor, torch::Tensor> positionsForLeftPadded(const torch::Tensor& tokens, std::int64_t pad_id) {
  const auto valid = tokens.ne(pad_id);
  const auto positions = (valid.to(torch::kLong).cumsum(1) - 1).clamp_min(0);
  return {positions, valid};
}

torch::Tensor sequenceLogProbs(PolicyModelImpl& model, const torch::Tensor& tokens, const torch::Tensor& lengths,
                               double temperature) {
  const auto B = tokens.size(0), T = tokens.size(1);
  const auto idx = torch::arange(T, tokens.options().dtype(torch::kLong)).unsqueeze(0);
  const auto valid = idx < lengths.unsqueeze(1);
  const auto positions = idx.expand({B, T}).contiguous();
  auto [states, head] = model.hiddenStatesAndHead(tokens, positions, valid, {}, temperature);
  const auto hidden = states.reshape({B * T, -1});  // [B*T,D]
  // Only the cells with a token to score: cell c (a valid token, not a row's first) from the
  // hidden state at c − 1. Padding and entry 0 stay 0 (no NaN leaks through mask products).
  const auto cells = torch::arange(B * T, positions.options())
                         .view({B, T})
                         .narrow(1, 1, T - 1)
                         .masked_select(valid.narrow(1, 1, T - 1));
  const auto logp = chunkedTokenLogProbs(hidden.index_select(0, cells - 1), tokens.reshape({-1}).index_select(0, cells),
                                         head, model.logitsChunkRows(cells.size(0)));
  return torch::zeros({B * T}, logp.options()).index_copy(0, cells, logp).view({B, T});
}

}  // namespace astraflow
