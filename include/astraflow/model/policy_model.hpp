#pragma once
// The policy: a decoder-only transformer of the Qwen3 / Qwen2 / Llama families — RMSNorm,
// rotary position embeddings (with linear or llama3 scaling), grouped-query attention (per-head
// q/k RMSNorm in Qwen3, q/k/v biases in Qwen2, optional biases in Llama), SwiGLU MLP, optional
// tied embeddings — with Hugging Face's parameter names. The same code serves the trainer (full causal forward) and the
// engine (incremental forward over a KV cache). Narrow LibTorch headers, not <torch/torch.h> (every nn module,
// optimiser and data loader: about twice the compile time of a file that includes this one; docs/performance.md).
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/utils.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/model_config.hpp"
#include "astraflow/model/attention_input.hpp"
#include "astraflow/model/chunked_logprobs.hpp"
#include "astraflow/model/parameter_shards.hpp"
#include "astraflow/model/prepacked_weights.hpp"

namespace astraflow {

namespace model_detail {
struct PrepackedWeights;  // model/packed_linear.hpp
class PackedLinear;
}  // namespace model_detail

// Keys and values of every layer for a batch, preallocated to `capacity` positions.
struct KvCache {
  std::vector<torch::Tensor> keys;    // per layer [B, kv_heads, capacity, head_dim]
  std::vector<torch::Tensor> values;  // per layer, same shape
  torch::Tensor key_valid;            // [B, capacity] bool: false for padding positions
  std::int64_t length = 0;            // positions filled
  std::int64_t capacity = 0;
};

// One forward's view of a paged KV pool (rollout/kv_block_pool.hpp owns the pool and builds
// the view): every layer's keys and values live in slot-major tensors, a sequence's positions in
// the slots its block table names. New tokens' K/V are written to `write_slots`, then each row
// attends to the K slots of `read_slots` (its context, the new tokens included) where
// `key_valid`, causally by position: query at position p sees keys at positions <= p.
struct PagedKv {
  std::vector<torch::Tensor> keys;    // per layer [slots, kv_heads, head_dim]
  std::vector<torch::Tensor> values;  // per layer, same shape
  torch::Tensor write_slots;          // [B*T] int64: the slot of each new token (padding: a scratch slot)
  torch::Tensor read_slots;           // [B*K] int64: the slots row b reads, K per row
  torch::Tensor key_positions;        // [B,K] int64: the position held in each read slot
  torch::Tensor key_valid;            // [B,K] bool: false for a row's padding keys
  torch::Tensor logits_at;            // [B] int64, optional: only this position's logits per row ([B,1,V])
};

// How a packed forward row is cut into sequences (trainer.packing, trainer.shared_prefix): a
// token attends to earlier tokens of its own segment (`id`), and also to those of the segment
// `sees` names — the prompt a group's responses share, laid out once before them. -1 in `id`:
// padding; `sees` undefined, or a value no segment has: nothing shared. Built implicitly from a
// plain id tensor.
struct Segments {
  Segments() = default;
  Segments(torch::Tensor id_, torch::Tensor sees_ = {}) : id(std::move(id_)), sees(std::move(sees_)) {}  // NOLINT
  torch::Tensor id;                                                                                      // [B,T] int64
  torch::Tensor sees;  // [B,T] int64, optional
  bool defined() const { return id.defined(); }
};

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

class PolicyModelImpl : public torch::nn::Module {
 public:
  // `uninitialised`: the parameters are left as allocated (no random draw, no page touched), for
  // a model whose weights a version fills before any use; otherwise drawn from the global
  // generator, or left for the caller to load when config.hf_path is set.
  explicit PolicyModelImpl(const ModelConfig& config, bool uninitialised = false);

  // Full causal forward. tokens, positions: [B,T] int64; valid: [B,T] bool (false = padding,
  // never attended to), on the model's device. Returns logits [B,T,V] in float32.
  // `segments` (optional) packs several sequences into a row: a token attends only to earlier
  // tokens of its own segment and of the one it `sees` (positions restart per sequence: the caller's).
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                        const Segments& segments = {});
  // Appends T new positions to `cache` and returns their logits [B,T,V]; new tokens attend to
  // every valid cached position and causally to each other.
  torch::Tensor forwardCached(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                              KvCache& cache);
  KvCache newCache(std::int64_t batch, std::int64_t capacity) const;
  // The full causal forward up to the final norm: hidden states [B,T,D] in the activations'
  // dtype, for chunkedTokenLogProbs with outputHead() (scoring without a [B,T,V] logits tensor).
  torch::Tensor hiddenStates(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                             const Segments& segments = {});
  OutputHead outputHead(double temperature = 1.0) const;
  // Both from one forward, for a backward through them: a tied model's head then shares this
  // forward's embedding gradient (TiedGradient), one [V, D] gradient buffer instead of two.
  std::pair<torch::Tensor, OutputHead> hiddenStatesAndHead(const torch::Tensor& tokens, const torch::Tensor& positions,
                                                           const torch::Tensor& valid, const Segments& segments,
                                                           double temperature);
  // Scoring computes float32 logits about this many bytes at a time (trainer.logits_chunk_bytes;
  // 0: all rows at once). logitsChunkRows: the rows per chunk for `rows` rows to score.
  void setLogitsChunkBytes(std::int64_t bytes) { logits_chunk_bytes_ = bytes; }
  std::int64_t logitsChunkRows(std::int64_t rows) const {
    return astraflow::logitsChunkRows(rows, config_.vocab_size, logits_chunk_bytes_);
  }
  // The same over a paged pool: writes the new tokens' K/V into `kv`'s slots and returns their
  // logits [B,T,V]. A padding query (valid false) must have position 0, where its row's first key is.
  torch::Tensor forwardPaged(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                             const PagedKv& kv);

  // Parameters in a fixed order with Hugging Face's names and order ("model.embed_tokens.weight",
  // "model.layers.0.self_attn.q_proj.weight", …): what weight transfer moves and checkpoints hold.
  std::vector<NamedTensor> orderedParameters() const;
  // bf16 copies of orderedParameters() (detached).
  std::vector<NamedTensor> exportBf16() const;
  // Loads tensors by name (any floating dtype) into the parameters; every name must be known
  // and every shape must match and every value be finite, else an Error naming the tensor;
  // nothing is copied unless all tensors pass.
  void importTensors(const std::vector<NamedTensor>& tensors);
  // The same checks, then the parameters become `tensors` themselves (no copy): each must have
  // its parameter's dtype and device. For read-only memory another owner keeps alive (viewWeights).
  void adoptTensors(const std::vector<NamedTensor>& tensors);
  // importTensors in steps, for a loader that streams from a memory map: matchTensors checks
  // names and shapes without reading any data (the parameter index of each tensor, or Error),
  // checkFinite one tensor's values, copyInto copies one into its parameter.
  std::vector<std::size_t> matchTensors(const std::vector<NamedTensor>& tensors) const;
  static void checkFinite(const NamedTensor& tensor);
  void copyInto(std::size_t index, const torch::Tensor& source);
  std::int64_t parameterCount() const;
  // Parameter `index`'s full shape (orderedParameters() order), whether or not it is sharded.
  torch::IntArrayRef parameterShape(std::size_t index) const { return shapes_[index]; }
  // Moves the model to `device` with parameters in `dtype` (float32 for a trainer's master
  // weights; bf16 for an engine computing in bf16). The KV caches it makes follow.
  void place(const torch::Device& device, torch::ScalarType dtype);
  // As place, but the parameters are reallocated uninitialised instead of converted: for a model
  // whose weights a version fills next (no copy, and no page touched until then).
  void placeUninitialised(const torch::Device& device, torch::ScalarType dtype);
  torch::Device device() const { return embed_.device(); }
  torch::ScalarType dtype() const { return embed_.scalar_type(); }
  // Tokens whose logits are forced to −inf in every forward (the tokenizer's <pad>, <bos>).
  void setNeverGenerate(const std::vector<std::int64_t>& token_ids);
  std::vector<std::int64_t> neverGenerate() const;

  // Activation checkpointing: a training forward keeps only each block's input and recomputes
  // the block's activations in the backward pass (model/block_checkpoint.cpp). Same gradients.
  void setActivationCheckpointing(bool on) { checkpoint_blocks_ = on; }
  bool activationCheckpointing() const { return checkpoint_blocks_; }

  // A one-position paged forward on the CPU attends over the KV pool in place
  // (model/paged_attention.cpp) when most of the keys a dense gather would copy are padding
  // (rows of unequal length); otherwise, and always when this is off, it gathers each row's keys
  // into a dense copy for scaled_dot_product_attention, as CUDA does. `always` takes the
  // in-place path whatever the padding (tests and the side-by-side benchmark).
  void setInPlacePagedDecode(bool on, bool always = false) {
    in_place_paged_decode_ = on;
    force_in_place_paged_decode_ = on && always;
  }

  // The CPU engine in float32 (rollout.prepacked_weights): the linear layers compute from their
  // weights packed once in MKL's GEMM layout (model/packed_linear.hpp) — q, k and v as one
  // product, gate and up as one — instead of LibTorch repacking each weight at every call; a
  // packed product is remade when one of its parameters changes (a new version). Only outside
  // autograd, on the CPU in float32, unsharded; a product of fewer than `min_elements` weight
  // elements is left to LibTorch (MKL's packed form costs ~8 MB however small the weight).
  void setPrepackedWeights(bool on, std::int64_t min_elements = kMinPrepackedElements);
  // The packed copies held now (made on first use).
  std::uint64_t prepackedBytes() const;

  // Parameter sharding (trainer.sharding: parameters): the blocks' weights live in `shards`
  // (which outlives the model's use of it); every forward gathers each block's weights before
  // running it and releases them after, and the backward recomputes the block (as activation
  // checkpointing does) between a second gather and the reduction of its gradients. Loading a
  // parameter (copyInto) goes to the shards. Null: the model holds every weight itself.
  void setParameterShards(ParameterShards* shards) { shards_ = shards; }
  ParameterShards* parameterShards() const { return shards_; }

  const ModelConfig& config() const { return config_; }

  // One transformer block on x [B,T,D] (cos/sin: rotary tables; attention: how queries see keys).
  // Public for the checkpointing function that recomputes it.
  torch::Tensor block(std::size_t layer, const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                      const AttentionInput& attention, KvCache* cache, const PagedKv* paged = nullptr) const;
  // Every forward through the explicit mask (the form before spans and the causal kernel; for
  // comparisons and the attention benchmark).
  void setExplicitMask(bool always) { explicit_mask_ = always; }
  // The attention input a forward of these rows takes (trunk() builds it once for every block).
  AttentionInput attentionInput(const torch::Tensor& positions, const torch::Tensor& valid, const Segments& segments,
                                KvCache* cache = nullptr, const PagedKv* paged = nullptr) const;
  std::vector<torch::Tensor> blockParameters(std::size_t layer) const;

 private:
  torch::Tensor run(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                    const Segments& segments, KvCache* cache, const PagedKv* paged = nullptr);
  // Embedding and every block: x [B,T,D] before the final norm.
  torch::Tensor trunk(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& valid,
                      const Segments& segments, KvCache* cache, const PagedKv* paged,
                      const c10::intrusive_ptr<TiedGradient>& tied = {});
  const torch::Tensor& outputWeight() const { return config_.tied_embeddings ? embed_ : lm_head_; }

  // Biases and q/k norms the family lacks stay undefined.
  struct Layer {
    torch::Tensor attn_norm, q, k, v, o, q_norm, k_norm, mlp_norm, gate, up, down;
    torch::Tensor q_bias, k_bias, v_bias, o_bias, gate_bias, up_bias, down_bias;
  };
  // Whether a paged forward of this many positions per row takes model/paged_attention.cpp.
  bool inPlacePagedDecode(const PagedKv* paged, std::int64_t positions_per_row) const;
  // The block's second half: x + MLP(norm(x)).
  torch::Tensor mlp(std::size_t l, const torch::Tensor& x) const;
  // Layer l's products that pack, and the output head (Head, whatever l is).
  enum class Product { Qkv, O, GateUp, Down, Head };
  // The packed form of `which` for input x, made or remade as needed; null where packing does
  // not apply (then torch::linear computes it).
  const model_detail::PackedLinear* packedFor(std::size_t l, Product which, const torch::Tensor& x) const;
  // x·Wᵀ + b from the packed form of a one-weight product when it applies.
  torch::Tensor linearOf(std::size_t l, Product which, const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& b) const;

  ModelConfig config_;
  torch::Tensor embed_;
  torch::Tensor final_norm_;
  torch::Tensor lm_head_;  // undefined when tied
  std::vector<Layer> layers_;
  std::vector<NamedTensor> ordered_;
  std::vector<std::vector<std::int64_t>> shapes_;  // of ordered_, kept while the tensors are sharded
  torch::Tensor inv_freq_;                         // float32 on the model's device
  torch::Tensor never_generate_;
  bool checkpoint_blocks_ = false;
  bool explicit_mask_ = false;
  bool in_place_paged_decode_ = true;
  bool force_in_place_paged_decode_ = false;
  std::int64_t logits_chunk_bytes_ = std::int64_t{64} << 20;
  ParameterShards* shards_ = nullptr;
  std::shared_ptr<model_detail::PrepackedWeights> packed_;  // set by setPrepackedWeights(true)
};

// x after `layer` of `model`, keeping only x for the backward pass (recomputes the block there).
torch::Tensor checkpointedBlock(const PolicyModelImpl& model, std::size_t layer, const torch::Tensor& x,
                                const torch::Tensor& cos, const torch::Tensor& sin, const AttentionInput& attention);
// x after `layer` with the block's weights held in `shards`: gathered for the forward (run without
// a graph, keeping only x) and again in the backward, which recomputes the block, hands the
// weights' gradients to shards.reduceGradients and returns x's.
torch::Tensor shardedBlock(const PolicyModelImpl& model, ParameterShards& shards, std::size_t layer,
                           const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                           const AttentionInput& attention);
TORCH_MODULE(PolicyModel);

// Positions and validity for right-aligned (left-padded) prompts: positions count valid
// tokens only, so a padded row computes exactly what it would alone.
std::pair<torch::Tensor, torch::Tensor> positionsForLeftPadded(const torch::Tensor& tokens, std::int64_t pad_id);

// Log-probs of given tokens (the trainer's, and what generation must match): full causal forward over each
// right-padded sequence; entry t of row b is log π(tokens[b][t] | tokens[b][<t]) under
// logits / temperature (entry 0 is 0). [B, T] float32.
torch::Tensor sequenceLogProbs(PolicyModelImpl& model, const torch::Tensor& tokens, const torch::Tensor& lengths,
                               double temperature = 1.0);

}  // namespace astraflow
