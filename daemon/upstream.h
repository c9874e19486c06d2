// hearthd's upstreams (issue 45): ipc's UpstreamForwarder over the HTTP client of fetch/,
// one Upstream per [[upstream]] table. Each keeps its models (listed, or discovered from its
// GET /v1/models at start and every discover_interval), a concurrency limit, counters for
// /health and /metrics, and a circuit breaker: kBreakerFailures requests in a row without an
// answer open it (requests get 503 at once), a background probe (GET /v1/models) every few
// seconds closes it again once the upstream answers.
//
// Thread-safety: every public member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "daemon/upstream_config.h"
#include "ipc/upstream.h"

namespace hearth::daemon {

class DaemonUpstreams final : public ipc::UpstreamForwarder {
 public:
  // Reads each upstream's API key file and the cache-salt secret (salt_secret_path, created
  // when absent), discovers the models of those that list none, and starts the background
  // thread. An error names the upstream and the file at fault.
  static Result<std::shared_ptr<DaemonUpstreams>> start(const std::vector<UpstreamConfig>& configs,
                                                        const std::string& salt_secret_path);
  ~DaemonUpstreams() override;

  std::optional<ipc::UpstreamModel> find(std::string_view model) const override;
  std::vector<ipc::UpstreamModel> models() const override;
  std::vector<ipc::UpstreamState> states() const override;
  std::string cache_salt(const std::string& scope_key) const override;
  std::optional<ipc::ForwardFailure> forward(const ipc::ForwardCall& call,
                                             const std::function<bool(int, const std::string&)>& on_head,
                                             const std::function<bool(const char*, size_t)>& on_data,
                                             const std::atomic<bool>& cancelled, std::string* broken) override;

  struct Upstream;

 private:
  DaemonUpstreams() = default;
  void background();

  std::string secret_;
  std::vector<std::unique_ptr<Upstream>> upstreams_;
  std::mutex mutex_;  // guards stop_
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth::daemon
