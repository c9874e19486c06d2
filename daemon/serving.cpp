#include "daemon/serving.h"

#include <sys/statvfs.h>

#include <chrono>
#include <filesystem>

#include "common/log.h"
#include "daemon/systemd.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/kv_store.h"
#include "storage/chunk_store.h"

namespace hearth::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// The disk tier's budget when --cache-max-bytes is not given: the smaller of 4 GiB and a
// tenth of the free space of the filesystem the cache lives on (its nearest existing
// ancestor when the directory does not exist yet).
uint64_t default_cache_budget(const std::string& dir) {
  constexpr uint64_t kMax = uint64_t{4} << 30;
  std::filesystem::path p = dir;
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  struct statvfs vfs {};
  if (p.empty() || statvfs(p.c_str(), &vfs) != 0) return kMax;
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return std::min(kMax, free_bytes / 10);
}

// The prompt cache's disk tier: the model file's fingerprint (remembered in the cache's
// index, so only the first start reads the whole file; it also seeds the hash chain), then
// the store in the directory, within the budget. Null: memory only, said in the log.
std::unique_ptr<storage::ChunkStore> open_disk_tier(const DaemonConfig& cfg, const std::string& model_path,
                                                    const ModelConfig& model, SchedulerOptions& o, bool reconcile) {
  if (cfg.no_disk_cache) {
    LOG_INFO("prompt cache: memory only (--no-disk-cache)");
    return nullptr;
  }
  const Clock::time_point t0 = Clock::now();
  Result<std::string> fp = storage::model_fingerprint(cfg.cache_dir, model_path);
  if (!fp) {
    LOG_WARN("prompt cache: memory only: cannot fingerprint the model file: " + fp.error().message);
    return nullptr;
  }
  o.model_fingerprint = *fp;
  const uint64_t max_bytes =
      cfg.cache_max_bytes > 0 ? static_cast<uint64_t>(cfg.cache_max_bytes) : default_cache_budget(cfg.cache_dir);
  Result<std::unique_ptr<storage::ChunkStore>> store =
      open_kv_store(model, o.kv_type, o.model_fingerprint, cfg.cache_dir, max_bytes,
                    static_cast<uint64_t>(cfg.cache_user_max_bytes), reconcile);
  if (!store) {
    LOG_WARN("prompt cache: the disk tier is off: " + store.error().message);
    return nullptr;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  LOG_INFO("prompt cache: " + cfg.cache_dir + ", at most " + std::to_string(max_bytes >> 20) +
           " MiB on disk; model fingerprint " + o.model_fingerprint + " (" + std::to_string(static_cast<int64_t>(ms)) +
           " ms)");
  return std::move(*store);
}

// The draft model `arg` names, loaded on the target's backend.
Result<std::unique_ptr<LoadedDraft>> load_draft(const std::string& arg, Backend& backend) {
  auto d = std::make_unique<LoadedDraft>();
  Result<std::string> path = resolve_model_arg(arg);
  if (!path) return path.error();
  d->path = *path;
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(d->path);
  if (!file) return make_error(d->path + ": " + file.error().message);
  d->file = std::move(*file);
  Result<std::unique_ptr<Model>> model = Model::load(d->file, backend);
  if (!model) return make_error(d->path + ": " + model.error().message);
  d->model = std::move(*model);
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*d->file);
  if (!tok) return make_error(d->path + ": " + tok.error().message);
  d->tokenizer = std::move(*tok);
  return d;
}

// Loads cfg's draft model beside s's model and binds it in s.options (see start_engine).
Status attach_draft(const DaemonConfig& cfg, Serving& s, bool must_fit) {
  if (cfg.draft_model.empty()) return {};
  if (s.options.speculative == SchedulerOptions::Speculative::Off) {
    LOG_INFO("draft model " + cfg.draft_model + ": not loaded (--speculative off)");
    return {};
  }
  Result<std::unique_ptr<LoadedDraft>> d = load_draft(cfg.draft_model, *s.engine.backend);
  if (!d) return make_error("cannot load the draft model " + cfg.draft_model + ": " + d.error().message);
  // Checked here first so that the error names the files (general.name can be obscure).
  if (Status fit = check_same_vocab(*s.engine.tokenizer, s.engine.info.path, *(*d)->tokenizer, (*d)->path); !fit) {
    if (must_fit) return fit.error();
    LOG_WARN(fit.error().message + "; " + s.engine.info.path + " is served without it");
    return {};
  }
  Result<std::shared_ptr<DraftModel>> bound =
      DraftModel::create(*s.engine.model, *s.engine.tokenizer, *(*d)->model, *(*d)->tokenizer, *s.engine.backend);
  if (!bound) return bound.error();
  LOG_INFO("draft model: " + (*d)->path + " drafts for " + s.engine.info.path);
  s.draft = std::move(*d);
  s.options.draft_model = std::move(*bound);
  return {};
}

}  // namespace

BackendChoice backend_choice(const DaemonConfig& cfg) {
  BackendChoice c;
  c.backend = cfg.backend;
  c.threads = cfg.threads;
  c.vk_device = cfg.vk_device;
  c.cuda_device = cfg.cuda_device;
  return c;
}

SchedulerOptions scheduler_options(const DaemonConfig& cfg, const ModelConfig& model) {
  SchedulerOptions o;
  o.n_parallel = cfg.parallel;
  o.n_ctx = cfg.ctx;
  if (model.n_ctx_train > 0 && cfg.ctx > model.n_ctx_train) {
    if (cfg.ctx_set) {
      LOG_WARN("--ctx " + std::to_string(cfg.ctx) + " is more than the model was trained for (" +
               std::to_string(model.n_ctx_train) + " tokens); quality may drop past that");
    } else {
      o.n_ctx = model.n_ctx_train;
      LOG_INFO("context: " + std::to_string(o.n_ctx) + " tokens (the model's training context)");
    }
  }
  o.prefill_chunk = cfg.prefill_chunk;
  o.step_budget_ms = cfg.step_budget_ms;
  o.speculative = cfg.speculative == "off" ? SchedulerOptions::Speculative::Off : SchedulerOptions::Speculative::Ngram;
  o.queue_max = cfg.queue_max;
  o.kv_type = cfg.kv_type;
  return o;
}

Result<Serving> start_engine(const DaemonConfig& cfg, const std::string& model_arg, bool reconcile_cache,
                             bool draft_must_fit) {
  const std::string model_name = model_arg.empty() ? "the default model" : model_arg;
  notify_status("loading " + model_name);
  LOG_INFO("loading " + model_name);
  const Clock::time_point load_start = Clock::now();
  Result<LoadedEngine> loaded = load_engine(model_arg, backend_choice(cfg), cfg.chat_template);
  if (!loaded) return make_error("cannot load the model: " + loaded.error().message);
  Serving s{std::move(*loaded), nullptr, {}, nullptr};
  LoadedEngine& engine = s.engine;
  s.options = scheduler_options(cfg, engine.model->config());
  if (Status st = attach_draft(cfg, s, draft_must_fit); !st) return st.error();
  std::unique_ptr<storage::ChunkStore> store =
      s.options.prefix_cache ? open_disk_tier(cfg, engine.info.path, engine.model->config(), s.options, reconcile_cache)
                             : nullptr;
  Result<std::unique_ptr<Scheduler>> created =
      Scheduler::create(*engine.model, *engine.backend, *engine.tokenizer, s.options, std::move(store));
  if (!created) return make_error("cannot start the engine: " + created.error().message);
  s.scheduler = std::move(*created);
  const SchedulerStats st = s.scheduler->stats();
  const CacheStats cs = s.scheduler->cache_stats();
  LOG_DEBUG("KV pool: " + std::to_string(st.kv_blocks_total) + " blocks of " + std::to_string(s.options.block_tokens) +
            " tokens (" + std::to_string(cs.memory_capacity_bytes >> 20) +
            " MiB); prompt cache: " + (cs.disk_enabled ? "memory and disk" : "memory only"));
  engine.info.n_ctx = s.options.n_ctx;
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();
  LOG_INFO("model loaded in " + std::to_string(static_cast<int64_t>(load_ms)) + " ms: " + engine.info.path + " (" +
           engine.info.arch + ", " + engine.backend->info().name + ", ctx " + std::to_string(s.options.n_ctx) +
           ", parallel " + std::to_string(s.options.n_parallel) + ")");
  return s;
}

}  // namespace hearth::daemon
