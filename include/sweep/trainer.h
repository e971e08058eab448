// The trainer as a library: train a model of your own in sweep's reproducible loop
// (canonical reduction, ZeRO 0-3, precision and loss scaling, clipping, schedules,
// checkpoints and bitwise resume, checksums and desync detection, records, reproduce).
//
//   class MyLm : public torch::nn::Module { ...
//     sweep::LossSum loss(const torch::Tensor& tokens);  // summed loss, target count
//   };
//   int main(int argc, char** argv) {
//     sweep::Models models = sweep::builtin_models();
//     models.add<MyLm>({"my-lm", "what it is", {sweep::int_key("hidden", 64, 8, 4096, "width")}},
//                      [](const sweep::ModelArgs& a) { return std::make_shared<MyLm>(a); });
//     return sweep::train_main(argc, argv, models);
//   }
//
// The program takes sweep-train's command line (--config, --out, --resume, --resume-from,
// --device, --describe-models); `sweep run` starts it when a grid says
// `launch.trainer: PATH`, and a grid selects the model with `model.kind: my-lm`.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sweep/model_keys.h"

namespace sweep {

struct RunConfig;

/// What a model factory is given: its own keys' values, the keys every model has, and
/// how the step computes. Valid during the factory call.
class ModelArgs {
 public:
  ModelArgs(const RunConfig& cfg, bool fp16_emulated) : cfg_(cfg), fp16_emulated_(fp16_emulated) {}
  /// An int key of this model. Throws std::invalid_argument naming the model and key when
  /// it declared no int key of that name.
  int64_t integer(const std::string& key) const;
  /// A real key of this model (as integer()).
  double real(const std::string& key) const;
  /// A choice key of this model (as integer()).
  const std::string& choice(const std::string& key) const;
  const std::string& kind() const;  ///< model.kind
  int64_t vocab() const;            ///< model.vocab: token ids are in [0, vocab)
  int64_t seq_len() const;          ///< model.seq_len: a micro-batch is [micro_batch, seq_len + 1] tokens
  /// train.precision is fp16 on the CPU: there is no fp16 autocast there, so a model that
  /// wants fp16 numerics rounds its matmul inputs itself (the built-in decoder does). The
  /// dynamic loss scale runs either way.
  bool fp16_emulated() const { return fp16_emulated_; }

 private:
  // The whole run config, for the built-in models (trainer/train.h: run_config_of); a
  // model of one's own reads its own keys and the ones above.
  friend const RunConfig& run_config_of(const ModelArgs& args);
  const std::string& value(const std::string& key, ModelKey::Type type) const;
  const RunConfig& cfg_;
  bool fp16_emulated_;
};

/// One micro-batch's summed (not mean) loss and the number of targets it sums over. The
/// trainer divides by the global batch's target count, so the loss and gradients are the
/// token-weighted mean over the whole step on any layout.
struct LossSum {
  torch::Tensor sum;    ///< a scalar (0-dim) tensor that depends on the parameters
  int64_t targets = 0;  ///< at least 1
  /// A leaf-aware model in a leaf step (sweep/leaf.h): [leaves] each leaf's summed loss
  /// (leaf::sum_per_leaf), whose sum is `sum`. Undefined otherwise.
  torch::Tensor per_leaf;
};

/// A mixture-of-experts model's routing: tokens sent to each expert of each routing layer,
/// layer-major (layers x experts counts).
struct RoutedTokens {
  int64_t layers = 0, experts = 0;
  std::vector<int64_t> counts;
};

/// A model in the loop. Its module's parameters, in registration order (named_parameters),
/// become the flat fp32 buffer that reduction, optimizer, checksums and checkpoints see;
/// they must all be registered in the constructor and never replaced.
class Model {
 public:
  virtual ~Model() = default;
  virtual torch::nn::Module& module() = 0;
  /// `tokens`: [micro_batch, seq_len + 1] int64 on the compute device; the usual
  /// next-token task reads inputs tokens[:, :-1] and targets tokens[:, 1:].
  virtual LossSum loss(const torch::Tensor& tokens) = 0;
  /// True when the model is built from the leaf-aware layers of sweep/leaf.h alone: a run
  /// with train.leaf then makes one forward and backward per micro-batch; otherwise one
  /// per leaf (the same bits for any micro-batch size either way).
  virtual bool leaf_aware() const { return false; }
  /// A mixture-of-experts model: the tokens its routers sent to each expert since the last
  /// call, and its shape (the same on every call, with zero counts before any forward).
  /// The trainer takes them after each step's micro-batches, sums them over the ranks and
  /// records them with the gradient telemetry (/telemetry/routed_tokens, from which the
  /// report shows each layer's load and routing entropy). A model that does not route
  /// returns {} (the default).
  virtual RoutedTokens take_routed_tokens() { return {}; }
};

/// Sequences a program supplies itself, for runs that say `data.kind: program` (otherwise
/// the model reads sweep's own sources: synthetic, tokens, text, hdf5). sweep's sampler
/// still decides which sample goes where (seed, epoch shuffle, layout-free), so sequence()
/// must be a pure function of its arguments, and thread-safe (prefetch workers call it
/// concurrently).
class DataSource {
 public:
  virtual ~DataSource() = default;
  /// Sequences per epoch (at least 1).
  virtual int64_t samples() const = 0;
  /// Writes sequence `sample` (< samples()) of `len` tokens, each in [0, vocab), to `out`.
  virtual void sequence(int64_t sample, int64_t len, int64_t* out) const = 0;
  /// One line for the log and the record's environment.
  virtual std::string describe() const = 0;
};

/// A model kind: its schema (kind, help, keys), its factory and, optionally, its data. The
/// factory runs once per rank, after the run's seed is set, on the CPU; parameters drawn
/// there are the run's initial values on every layout. A factory that throws
/// std::invalid_argument rejects the config (keys that contradict each other): the run
/// exits 2 with "model 'KIND': " and the message, and writes nothing.
struct ModelSpec {
  ModelSchema schema;
  std::function<std::unique_ptr<Model>(const ModelArgs&)> make;
  /// For `data.kind: program`; empty when the kind supplies no data of its own.
  std::function<std::unique_ptr<DataSource>(const ModelArgs&)> data;
};

/// Adapts a module with `LossSum loss(const torch::Tensor&)` to Model.
template <class M>
class ModuleModel : public Model {
 public:
  explicit ModuleModel(std::shared_ptr<M> m) : m_(std::move(m)) {}
  torch::nn::Module& module() override { return *m_; }
  LossSum loss(const torch::Tensor& tokens) override { return m_->loss(tokens); }
  /// M's own `bool leaf_aware() const`, when it has one.
  bool leaf_aware() const override {
    if constexpr (HasLeafAware<M>::value) {
      return m_->leaf_aware();
    } else {
      return false;
    }
  }
  /// M's own `RoutedTokens take_routed_tokens()`, when it has one.
  RoutedTokens take_routed_tokens() override {
    if constexpr (HasRoutedTokens<M>::value) {
      return m_->take_routed_tokens();
    } else {
      return {};
    }
  }

 private:
  template <class T, class = void>
  struct HasLeafAware : std::false_type {};
  template <class T>
  struct HasLeafAware<T, std::void_t<decltype(std::declval<const T&>().leaf_aware())>> : std::true_type {};
  template <class T, class = void>
  struct HasRoutedTokens : std::false_type {};
  template <class T>
  struct HasRoutedTokens<T, std::void_t<decltype(std::declval<T&>().take_routed_tokens())>> : std::true_type {};
  std::shared_ptr<M> m_;
};

/// The model kinds a program offers.
class Models {
 public:
  /// Adds a kind. Throws std::invalid_argument when the schema is malformed, a key is
  /// named like a key every model has (kind, vocab, seq_len), or the kind is taken.
  Models& add(ModelSpec spec);
  /// Adds a module type M (a torch::nn::Module with `LossSum loss(const torch::Tensor&)`),
  /// made by `make`, with the data of `data` for `data.kind: program` (optional).
  template <class M>
  Models& add(ModelSchema schema, std::function<std::shared_ptr<M>(const ModelArgs&)> make,
              std::function<std::unique_ptr<DataSource>(const ModelArgs&)> data = {}) {
    static_assert(std::is_base_of_v<torch::nn::Module, M>, "M must be a torch::nn::Module");
    return add(ModelSpec{std::move(schema),
                         [make = std::move(make)](const ModelArgs& a) -> std::unique_ptr<Model> {
                           return std::make_unique<ModuleModel<M>>(make(a));
                         },
                         std::move(data)});
  }
  /// The kind's spec; nullptr when none.
  const ModelSpec* find(const std::string& kind) const;
  const std::vector<ModelSpec>& specs() const { return specs_; }

 private:
  friend Models builtin_models();
  std::vector<ModelSpec> specs_;
};

/// The built-in decoder (model.kind: decoder, the default).
Models builtin_models();

/// sweep-train's whole command line over `models`: trains the run of --config into --out
/// and returns the exit code (0 completed, 1 failed or diverged, 2 bad config or usage,
/// 3 refused, 4 a rank made no progress). `--describe-models` prints the registered
/// kinds' schemas (YAML) for the `sweep` driver.
int train_main(int argc, char** argv, const Models& models);

}  // namespace sweep
