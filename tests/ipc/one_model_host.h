// A ModelHost serving one engine that is always loaded: what the tests' server (and the
// HTTP fuzzer's routes) serve, the model answering to its id, its aliases and "".
#pragma once

#include <memory>
#include <string>

#include "ipc/model_host.h"

namespace hearth::test {

class OneModelHost final : public ipc::ModelHost {
 public:
  explicit OneModelHost(std::shared_ptr<const ipc::EngineRef> engine) : engine_(std::move(engine)) {}

  std::optional<std::string> resolve(std::string_view name) const override {
    if (name.empty() || engine_->model.answers_to(name)) return engine_->model.id;
    return std::nullopt;
  }
  std::shared_ptr<const ipc::EngineRef> loaded(const std::string& id) override {
    return id == engine_->model.id ? engine_ : nullptr;
  }
  Loaded load(const std::string& id) override {
    if (id != engine_->model.id) return ipc::HostError{ipc::HostError::Kind::UnknownModel, "no model " + id};
    return engine_;
  }
  bool unload(const std::string&) override { return false; }  // it stays
  void request_ended(const std::string&, std::optional<ipc::KeepAlive>) override {}
  std::vector<ipc::HostedModel> models() const override {
    const ipc::ModelInfo& m = engine_->model;
    ipc::HostedModel h;
    h.id = m.id;
    h.aliases = m.aliases;
    h.path = m.path;
    h.created = m.created;
    h.arch = m.arch;
    h.loaded = true;
    h.backend = m.backend;
    h.n_ctx = engine_->n_ctx;
    return {h};
  }
  bool servable() const override { return true; }

 private:
  std::shared_ptr<const ipc::EngineRef> engine_;
};

}  // namespace hearth::test
