// The model registry of a trainer program (sweep/trainer.h): ModelArgs' typed access to a
// kind's keys, Models, and the built-in decoder as one registered model.
#include <stdexcept>

#include "model.h"         // Transformer
#include "model_schema.h"  // kDecoderKind, validate_model_schema
#include "run_config.h"
#include "sweep/trainer.h"
#include "train.h"  // run_config_of

namespace sweep {

const RunConfig& run_config_of(const ModelArgs& args) { return args.cfg_; }

const std::string& ModelArgs::value(const std::string& key, ModelKey::Type type) const {
  const ModelSchema* s = find_model_schema(cfg_.model.kind);
  if (s)
    for (size_t i = 0; i < s->keys.size() && i < cfg_.model.values.size(); ++i)
      if (s->keys[i].name == key && s->keys[i].type == type) return cfg_.model.values[i].second;
  const char* type_name = type == ModelKey::Type::integer ? "int" : type == ModelKey::Type::real ? "real" : "choice";
  throw std::invalid_argument("model '" + cfg_.model.kind + "': no " + type_name + " key '" + key +
                              "' is declared in its schema");
}

int64_t ModelArgs::integer(const std::string& key) const { return std::stoll(value(key, ModelKey::Type::integer)); }

double ModelArgs::real(const std::string& key) const {
  // Canonical text from config/: std::strtod reads it back to the same double.
  return std::strtod(value(key, ModelKey::Type::real).c_str(), nullptr);
}

const std::string& ModelArgs::choice(const std::string& key) const { return value(key, ModelKey::Type::choice); }
const std::string& ModelArgs::kind() const { return cfg_.model.kind; }
int64_t ModelArgs::vocab() const { return cfg_.model.vocab; }
int64_t ModelArgs::seq_len() const { return cfg_.model.seq_len; }

Models& Models::add(ModelSpec spec) {
  validate_model_schema(spec.schema);  // refuses the decoder's kind too
  if (find(spec.schema.kind)) throw std::invalid_argument("model '" + spec.schema.kind + "': added twice");
  if (!spec.make) throw std::invalid_argument("model '" + spec.schema.kind + "': no factory");
  specs_.push_back(std::move(spec));
  return *this;
}

const ModelSpec* Models::find(const std::string& kind) const {
  for (const ModelSpec& s : specs_)
    if (s.schema.kind == kind) return &s;
  return nullptr;
}

namespace {

/// The built-in decoder through the same seam as any model: its loss is the summed
/// next-token cross-entropy over all micro_batch x seq_len targets.
class DecoderModel : public Model {
 public:
  explicit DecoderModel(const ModelArgs& a)
      : net_(run_config_of(a).model, a.fp16_emulated() ? MatmulPrecision::fp16_emulated : MatmulPrecision::fp32) {}
  torch::nn::Module& module() override { return *net_; }
  LossSum loss(const torch::Tensor& tokens) override {
    LeafLoss l = net_->loss_sum(tokens);
    return {l.sum, tokens.size(0) * (tokens.size(1) - 1), l.per_leaf};
  }
  bool leaf_aware() const override { return true; }
  RoutedTokens take_routed_tokens() override { return net_->take_routed_tokens(); }

 private:
  Transformer net_;
};

}  // namespace

Models builtin_models() {
  Models m;
  // The decoder's keys are the built-in table's (config/run_config.cpp), not a schema:
  // added past add()'s checks, which keep its kind for it.
  m.specs_.push_back(ModelSpec{ModelSchema{kDecoderKind, "built-in decoder-only transformer", {}},
                               [](const ModelArgs& a) { return std::make_unique<DecoderModel>(a); },
                               /*data=*/{}});
  return m;
}

}  // namespace sweep
