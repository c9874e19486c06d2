#include "daemon/model_host.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "daemon/engine_loader.h"
#include "daemon/serving.h"
#include "engine/gguf/gguf.h"
#include "engine/model/architecture.h"
#include "engine/model/catalog.h"
#include "engine/model/installed.h"
#include "engine/model/model_path.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/scheduler.h"
#include "fetch/hub.h"

namespace hearth::daemon {

namespace {

using namespace std::chrono_literals;

// At an unload the prompt cache's writer writes the chunks still queued, giving up on the
// rest only after this long without finishing one.
constexpr auto kUnloadFlush = 5000ms;
// A load that needs room held by models serving requests waits this long for one of them to
// go idle, then answers 503.
constexpr auto kBusyWait = 30s;

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

ipc::HostedModel listing(const InstalledModel& m) {
  ipc::HostedModel h;
  ModelNames names = model_names(m.path);
  h.id = std::move(names.id);
  h.aliases = std::move(names.aliases);
  h.path = m.path;
  h.file_bytes = static_cast<uint64_t>(std::max<int64_t>(m.bytes, 0));
  h.created = m.modified;
  h.arch = m.arch;
  h.quantization = m.quantization;
  h.sampling = m.sampling;
  h.available = m.usable;
  h.reason = m.error;
  return h;
}

// A Hub name the model was given by (--model hf.co/ORG/REPO:QUANT) names it in requests too,
// even when no record of its pull says so (a file pulled before records).
void add_hub_alias(ipc::HostedModel& h, const std::string& name) {
  if (!fetch::is_hub_name(name) || h.id == name) return;
  if (std::find(h.aliases.begin(), h.aliases.end(), name) == h.aliases.end()) h.aliases.push_back(name);
}

}  // namespace

uint64_t default_memory_budget() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024 / 4 * 3;
  }
  return uint64_t{8} << 30;
}

// What an unload takes out of its slot; destroyed off the host's lock.
struct DaemonModelHost::Taken {
  std::string id;
  std::shared_ptr<Serving> serving;
  std::shared_ptr<const ipc::EngineRef> engine;
};

struct DaemonModelHost::Slot {
  ipc::HostedModel info;  // what the listing read; the loaded fields are filled by models()
  // Unloading: taken out of service, its cache writes being finished and its memory freed
  // (still charged to the budgets and listed by models() until that is done).
  enum class State { Unloaded, Loading, Loaded, Unloading } state = State::Unloaded;
  std::shared_ptr<Serving> serving;              // while loaded
  std::shared_ptr<const ipc::EngineRef> engine;  // while loaded; its owner is serving
  uint64_t charge = 0;                           // bytes charged to RAM's budget while loading, loaded or unloading
  uint64_t device_charge = 0;                    // bytes charged to the GPU's budget while loading, loaded or unloading
  Clock::time_point last_used{};
  int64_t loaded_at = 0;
  std::optional<ipc::KeepAlive> keep_alive;  // nullopt: the daemon's --keep-alive
  bool unload_requested = false;
  uint64_t loads = 0;
  uint64_t attempts = 0;  // loads ended, well or not: a waiter tells the end of the one it waited for
  std::optional<ipc::HostError> last_error;
};

DaemonModelHost::DaemonModelHost(DaemonConfig cfg, HostOptions options)
    : cfg_(std::move(cfg)),
      options_(std::move(options)),
      budget_(options_.memory_budget > 0 ? options_.memory_budget : default_memory_budget()) {
  // Without --model, every model in the folder; with it, that model only.
  if (options_.start_model.empty()) {
    for (const InstalledModel& m : scan_models(options_.models_dir)) {
      auto slot = std::make_unique<Slot>();
      slot->info = listing(m);
      if (find(slot->info.id) == nullptr) slots_.push_back(std::move(slot));
    }
  }
  // The start model: --model, else the catalog's default when it is installed, else the
  // first model that can be served.
  Result<std::string> start = resolve_model_arg(options_.start_model);
  if (start) {
    Slot* same = nullptr;
    for (const auto& s : slots_)
      if (same_file(s->info.path, *start)) same = s.get();
    if (same == nullptr) {
      auto slot = std::make_unique<Slot>();
      slot->info = listing(inspect_model(*start));
      default_id_ = slot->info.id;
      add_hub_alias(slot->info, options_.start_model);
      if (find(slot->info.id) == nullptr) slots_.push_back(std::move(slot));
    } else {
      default_id_ = same->info.id;
      add_hub_alias(same->info, options_.start_model);
    }
  } else if (!options_.start_model.empty()) {
    LOG_WARN("--model " + options_.start_model + ": " + start.error().message);
  }
  for (const std::string& arg : options_.more_models) {
    Result<std::string> path = resolve_model_arg(arg);
    if (!path) {
      listing_error_ = "--model " + arg + ": " + path.error().message;
      continue;
    }
    bool listed = false;
    for (const auto& s : slots_) listed = listed || same_file(s->info.path, *path);
    auto slot = std::make_unique<Slot>();
    slot->info = listing(inspect_model(*path));
    if (!listed && find(slot->info.id) == nullptr) slots_.push_back(std::move(slot));
  }
  if (default_id_.empty() && options_.start_model.empty()) {
    for (const auto& s : slots_) {
      if (s->info.available) {
        default_id_ = s->info.id;
        break;
      }
    }
  }
  reaper_ = std::thread([this] { reap(); });
}

std::string DaemonModelHost::add_installed(const std::string& path) {
  auto slot = std::make_unique<Slot>();
  slot->info = listing(inspect_model(path));  // reads the header: off the lock
  std::string id = slot->info.id;
  if (!options_.start_model.empty()) return id;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& s : slots_)
    if (s->info.id == id || same_file(s->info.path, path)) return s->info.id;
  slots_.push_back(std::move(slot));
  if (default_id_.empty() && slots_.back()->info.available) default_id_ = id;
  return id;
}

DaemonModelHost::~DaemonModelHost() {
  unload_all(kUnloadFlush);
}

DaemonModelHost::Slot* DaemonModelHost::find(const std::string& id) {
  for (const auto& s : slots_)
    if (s->info.id == id) return s.get();
  return nullptr;
}
const DaemonModelHost::Slot* DaemonModelHost::find(const std::string& id) const {
  for (const auto& s : slots_)
    if (s->info.id == id) return s.get();
  return nullptr;
}

size_t DaemonModelHost::finish(Taken t, std::chrono::milliseconds flush, const char* why) {
  const auto t0 = std::chrono::steady_clock::now();
  t.serving->scheduler->stop_accepting();
  const size_t dropped = t.serving->scheduler->close_cache(flush);
  t.engine.reset();
  t.serving.reset();  // joins the engine thread, then frees the weights
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("unloaded " + t.id + " (" + why + ") in " + std::to_string(static_cast<int64_t>(ms)) + " ms");
  if (dropped > 0) LOG_WARN("prompt cache: " + std::to_string(dropped) + " chunks of " + t.id + " were not written");
  std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* s = find(t.id); s != nullptr && s->state == Slot::State::Unloading) {
    s->state = Slot::State::Unloaded;
    s->charge = s->device_charge = 0;
  }
  changed_.notify_all();
  return dropped;
}

ipc::KeepAlive DaemonModelHost::keep_alive_of(const Slot& s) const {
  return s.unload_requested ? ipc::KeepAlive{0ms} : s.keep_alive.value_or(options_.keep_alive);
}

bool DaemonModelHost::idle(const Slot& s) {
  return s.state == Slot::State::Loaded && s.engine.use_count() == 1 && s.engine->scheduler->in_flight() == 0;
}

std::optional<std::string> DaemonModelHost::resolve(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (name.empty()) return default_id_.empty() ? std::nullopt : std::optional<std::string>(default_id_);
  for (const auto& s : slots_) {
    if (s->info.id == name) return s->info.id;
    for (const std::string& a : s->info.aliases)
      if (a == name) return s->info.id;
  }
  return std::nullopt;
}

std::shared_ptr<const ipc::EngineRef> DaemonModelHost::loaded(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* s = find(id);
  if (s == nullptr || s->state != Slot::State::Loaded) return nullptr;
  return s->engine;  // a pending unload stays: the model goes once its requests end
}

uint64_t DaemonModelHost::estimate_bytes(const Slot& s) const {
  // The weights as the file has them, plus the KV pool the scheduler will allocate, plus
  // the draft model's weights and KV when one is given.
  uint64_t bytes = s.info.file_bytes;
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(s.info.path);
  if (!file) return bytes;
  ModelConfig c;
  if (!read_model_config(**file, c)) return bytes;
  const SchedulerOptions o = scheduler_options(cfg_, c);
  return bytes + kv_pool_bytes(c, o) + draft_estimate(o);
}

uint64_t DaemonModelHost::draft_estimate(const SchedulerOptions& o) const {
  if (cfg_.draft_model.empty() || o.speculative == SchedulerOptions::Speculative::Off) return 0;
  Result<std::string> path = resolve_model_arg(cfg_.draft_model);
  if (!path) return 0;  // the load says why
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(*path);
  ModelConfig c;
  if (!file || !read_model_config(**file, c)) return 0;
  return (*file)->size() + draft_kv_bytes(c, o.n_ctx, o.n_parallel);
}

uint64_t DaemonModelHost::charged_bytes(bool device) const {
  uint64_t total = 0;
  for (const auto& s : slots_)
    if (s->state != Slot::State::Unloaded) total += device ? s->device_charge : s->charge;
  return total;
}

uint64_t DaemonModelHost::gpu_budget() const {
  return options_.gpu_memory_budget > 0 ? options_.gpu_memory_budget : gpu_->memory_bytes / 10 * 9;
}

std::string DaemonModelHost::budget_summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = mib(budget_) + " of RAM";
  if (gpu_) out += ", " + mib(gpu_budget()) + " of " + gpu_->name;
  return out;
}

std::optional<ipc::HostError> DaemonModelHost::too_large(const std::string& id, uint64_t host, uint64_t device) const {
  const bool gpu = device > 0;
  const uint64_t need = gpu ? device : host, budget = gpu ? gpu_budget() : budget_;
  if (need <= budget) return std::nullopt;
  return ipc::HostError{ipc::HostError::Kind::TooLarge,
                        "The model '" + id + "' needs about " + mib(need) + " (weights and KV cache), more than the " +
                            (gpu ? "GPU memory budget of " + mib(budget) + " (--gpu-memory-budget, " + gpu_->name + ")"
                                 : "memory budget of " + mib(budget) + " (--memory-budget)")};
}

std::string DaemonModelHost::loaded_summary() const {
  std::string out;
  for (const auto& s : slots_) {
    const uint64_t bytes = s->charge + s->device_charge;
    if (s->state == Slot::State::Unloaded || bytes == 0) continue;  // 0: waiting for room, not charged yet
    if (!out.empty()) out += ", ";
    const char* state = s->state == Slot::State::Loading     ? ", loading"
                        : s->state == Slot::State::Unloading ? ", unloading"
                                                             : "";
    out += s->info.id + " (" + mib(bytes) + state + ")";
  }
  return out;
}

ipc::ModelHost::Loaded DaemonModelHost::load(const std::string& id) {
  std::unique_lock<std::mutex> lock(mutex_);
  Slot* s = find(id);
  if (s == nullptr) return ipc::HostError{ipc::HostError::Kind::UnknownModel, "The model '" + id + "' does not exist"};
  if (!s->info.available) {
    return ipc::HostError{ipc::HostError::Kind::Unservable,
                          "The model '" + id + "' cannot be served: " + s->info.reason};
  }
  for (;;) {
    if (stopping_) return ipc::HostError{ipc::HostError::Kind::ShuttingDown, "the server is shutting down"};
    if (s->state == Slot::State::Loaded) {
      s->unload_requested = false;
      return s->engine;
    }
    if (s->state == Slot::State::Unloading) {  // loaded again once its unload has ended
      changed_.wait(lock, [&] { return s->state != Slot::State::Unloading || stopping_; });
      continue;
    }
    if (s->state == Slot::State::Loading) {
      const uint64_t attempt = s->attempts;
      changed_.wait(lock, [&] { return s->attempts != attempt || stopping_; });
      if (s->state == Slot::State::Unloaded && s->last_error) return *s->last_error;
      continue;
    }
    break;
  }
  // This caller loads it. First the room: idle models go, least recently used first. The
  // model goes where the others went: into the GPU's memory once one has loaded there.
  lock.unlock();
  const uint64_t need = estimate_bytes(*s);
  lock.lock();
  if (s->state != Slot::State::Unloaded) {  // another caller started meanwhile
    lock.unlock();
    return load(id);
  }
  const uint64_t need_host = gpu_ ? 0 : need, need_device = gpu_ ? need : 0;
  if (std::optional<ipc::HostError> e = too_large(id, need_host, need_device)) return *e;
  // Loading from here on: other callers for it wait for this one, even while it waits for room.
  s->state = Slot::State::Loading;
  s->charge = 0;
  s->device_charge = 0;
  s->last_error.reset();
  std::vector<Taken> evicted;
  uint64_t freeing = 0, freeing_device = 0;  // what the evicted hold: freed by this caller before it loads
  const Clock::time_point busy_deadline = Clock::now() + kBusyWait;
  const auto short_of = [&](bool device) {
    return device ? need_device > 0 && charged_bytes(true) - freeing_device + need_device > gpu_budget()
                  : charged_bytes(false) - freeing + need_host > budget_;
  };
  while (short_of(false) || short_of(true)) {
    const bool device = !short_of(false);  // RAM's room first, then the GPU's
    Slot* lru = nullptr;
    for (const auto& o : slots_)
      if (o.get() != s && idle(*o) && (device ? o->device_charge : o->charge) > 0 &&
          (lru == nullptr || o->last_used < lru->last_used))
        lru = o.get();
    if (lru == nullptr && !stopping_ && Clock::now() < busy_deadline) {
      // The others serve requests (or their last request is letting go of them): wait for
      // one to go idle, as a queued request would.
      changed_.wait_for(lock, 50ms);
      continue;
    }
    if (lru == nullptr) {
      const std::string held = loaded_summary();
      for (Taken& t : evicted) {  // put back what was taken: nothing can be loaded now
        Slot* back = find(t.id);
        back->serving = std::move(t.serving);
        back->engine = std::move(t.engine);
        back->state = Slot::State::Loaded;
      }
      s->state = Slot::State::Unloaded;
      s->last_error = ipc::HostError{
          ipc::HostError::Kind::MemoryBusy,
          "The model '" + id + "' needs about " + mib(need) + "; the " +
              (device ? "GPU memory budget of " + mib(gpu_budget()) : "memory budget of " + mib(budget_)) +
              " is held by models serving requests: " + held + "; try again when they finish"};
      ++s->attempts;
      changed_.notify_all();
      return *s->last_error;
    }
    evicted.push_back(Taken{lru->info.id, std::move(lru->serving), std::move(lru->engine)});
    lru->state = Slot::State::Unloading;
    freeing += lru->charge;
    freeing_device += lru->device_charge;
  }
  // The first model this process loads reconciles the shared cache directory; later ones
  // must not, while another model's store may be writing there.
  const bool reconcile_cache = !cache_reconciled_;
  cache_reconciled_ = true;
  s->charge = need_host;
  s->device_charge = need_device;
  lock.unlock();

  for (Taken& t : evicted) finish(std::move(t), kUnloadFlush, ("to make room for " + id).c_str());
  // A draft model must fit the start model (or hearthd does not start); others go without.
  Result<Serving> started = start_engine(cfg_, s->info.path, reconcile_cache, id == default_id_);
  std::shared_ptr<Serving> serving;
  std::shared_ptr<const ipc::EngineRef> engine;
  if (started) {
    serving = std::make_shared<Serving>(std::move(*started));
    engine =
        ipc::make_engine_ref(serving->scheduler.get(), serving->engine.tokenizer.get(), serving->engine.info, serving);
  }

  lock.lock();
  ++s->attempts;
  if (!started) {
    s->state = Slot::State::Unloaded;
    s->charge = 0;
    s->last_error = ipc::HostError{ipc::HostError::Kind::LoadFailed,
                                   "The model '" + id + "' could not be loaded: " + started.error().message};
    LOG_ERROR(s->last_error->message);
    changed_.notify_all();
    return *s->last_error;
  }
  // Charged what it holds: its weights and KV pool, in the GPU's memory or in RAM.
  const DeviceInfo device = serving->engine.backend->info();
  uint64_t holds = s->info.file_bytes + serving->scheduler->cache_stats().memory_capacity_bytes;
  if (serving->draft)  // the draft model's weights, and the most KV its sequences take
    holds += serving->draft->file->size() +
             draft_kv_bytes(serving->draft->model->config(), serving->options.n_ctx, serving->options.n_parallel);
  const bool on_gpu = device.memory_bytes > 0;
  if (on_gpu && !gpu_) gpu_ = device;
  s->charge = on_gpu ? 0 : holds;
  s->device_charge = on_gpu ? holds : 0;
  if (on_gpu && need_device == 0) {
    // The first model on the GPU (it was charged to RAM until now): it must fit the GPU's budget.
    if (std::optional<ipc::HostError> e = too_large(id, 0, holds)) {
      s->state = Slot::State::Unloaded;
      s->charge = s->device_charge = 0;
      s->last_error = *e;
      changed_.notify_all();
      lock.unlock();
      finish(Taken{id, std::move(serving), std::move(engine)}, kUnloadFlush, "over the GPU memory budget");
      return *e;
    }
  }
  s->serving = serving;
  s->engine = engine;
  s->state = Slot::State::Loaded;
  s->loaded_at = static_cast<int64_t>(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
  s->last_used = Clock::now();
  s->unload_requested = false;
  ++s->loads;
  changed_.notify_all();
  return engine;
}

Status DaemonModelHost::load_at_start(const std::string& id) {
  Loaded r = load(id);
  if (auto* e = std::get_if<ipc::HostError>(&r)) return make_error(e->message);
  std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* s = find(id); s != nullptr && !s->keep_alive) s->keep_alive = ipc::KeepAlive{};  // for ever
  return {};
}

bool DaemonModelHost::unload(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* s = find(id);
  if (s == nullptr || s->state != Slot::State::Loaded) return false;
  s->unload_requested = true;
  changed_.notify_all();
  return true;
}

void DaemonModelHost::request_ended(const std::string& id, std::optional<ipc::KeepAlive> keep_alive) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* s = find(id);
  if (s == nullptr) return;
  s->last_used = Clock::now();
  if (keep_alive) s->keep_alive = *keep_alive;
  changed_.notify_all();
}

std::vector<ipc::HostedModel> DaemonModelHost::models() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ipc::HostedModel> out;
  const Clock::time_point now = Clock::now();
  for (const auto& s : slots_) {
    ipc::HostedModel m = s->info;
    m.loads = s->loads;
    m.loaded = s->state == Slot::State::Loaded;
    m.unloading = s->state == Slot::State::Unloading;
    if (m.unloading) {
      m.memory_bytes = s->charge + s->device_charge;
      m.device_memory_bytes = s->device_charge;
      m.loaded_at = s->loaded_at;
      m.expires_in_s = 0.0;
    }
    if (m.loaded) {
      m.backend = s->engine->model.backend;
      m.memory_bytes = s->charge + s->device_charge;
      m.device_memory_bytes = s->device_charge;
      if (s->device_charge > 0 && gpu_) m.device = gpu_->name;
      m.n_ctx = s->engine->n_ctx;
      m.in_flight = s->engine->scheduler->in_flight();
      m.loaded_at = s->loaded_at;
      const bool busy = !idle(*s);
      m.idle_s = busy ? 0 : std::chrono::duration<double>(now - s->last_used).count();
      const ipc::KeepAlive ka = keep_alive_of(*s);
      if (ka.duration) {
        const double left = std::chrono::duration<double>(s->last_used + *ka.duration - now).count();
        m.expires_in_s = busy ? std::chrono::duration<double>(*ka.duration).count() : std::max(0.0, left);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

bool DaemonModelHost::servable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return false;
  return std::ranges::any_of(slots_,
                             [](const auto& s) { return s->state == Slot::State::Loaded || s->info.available; });
}

// The reaper: unloads each idle model whose keep-alive has run out since its last request.
void DaemonModelHost::reap() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = now + 1s;
    std::vector<Taken> expired;
    for (const auto& s : slots_) {
      if (s->state != Slot::State::Loaded) continue;
      const ipc::KeepAlive ka = keep_alive_of(*s);
      if (!ka.duration) continue;
      const Clock::time_point deadline = s->last_used + *ka.duration;
      if (now < deadline) {
        next = std::min(next, deadline);
      } else if (idle(*s)) {
        expired.push_back(Taken{s->info.id, std::move(s->serving), std::move(s->engine)});
        s->state = Slot::State::Unloading;
        s->unload_requested = false;
      } else {
        next = std::min(next, now + 50ms);  // its last request is letting go of it
      }
    }
    if (!expired.empty()) {
      lock.unlock();
      for (Taken& t : expired) finish(std::move(t), kUnloadFlush, "keep-alive over");
      lock.lock();
      continue;
    }
    changed_.wait_until(lock, next);
  }
}

int64_t DaemonModelHost::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& s : slots_)
    if (s->state == Slot::State::Loaded) n += s->engine->scheduler->in_flight();
  return n;
}

uint64_t DaemonModelHost::steps_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : slots_)
    if (s->state == Slot::State::Loaded) n += s->engine->scheduler->stats().steps_total;
  return n;
}

void DaemonModelHost::stop_accepting() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& s : slots_)
    if (s->state == Slot::State::Loaded) s->engine->scheduler->stop_accepting();
}

void DaemonModelHost::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& s : slots_)
    if (s->state == Slot::State::Loaded) s->engine->scheduler->cancel_all();
}

size_t DaemonModelHost::unload_all(std::chrono::milliseconds flush) {
  std::vector<Taken> all;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
    // A load in progress ends first (its engine is then unloaded with the others).
    changed_.wait(lock, [&] {
      return std::ranges::none_of(slots_, [](const auto& s) { return s->state == Slot::State::Loading; });
    });
    for (const auto& s : slots_) {
      if (s->state != Slot::State::Loaded) continue;
      all.push_back(Taken{s->info.id, std::move(s->serving), std::move(s->engine)});
      s->state = Slot::State::Unloading;
    }
  }
  if (reaper_.joinable()) reaper_.join();
  size_t dropped = 0;
  for (Taken& t : all) dropped += finish(std::move(t), flush, "stopping");
  return dropped;
}

}  // namespace hearth::daemon
