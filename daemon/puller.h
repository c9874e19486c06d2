// POST /api/pull in hearthd: the downloader of `hearth pull` (fetch/pull.h) behind ipc's
// ModelPuller, writing into the models folder, and the host told of the new file so that it
// is served by name at once (when hearthd serves the folder).
#pragma once

#include <memory>
#include <string>

#include "daemon/model_host.h"
#include "ipc/model_puller.h"

namespace hearth::daemon {

class DaemonPuller final : public ipc::ModelPuller {
 public:
  DaemonPuller(std::string models_dir, std::shared_ptr<DaemonModelHost> host);
  Result<std::string> pull(const std::string& name, const std::function<void(const ipc::PullProgress&)>& on_progress,
                           const std::atomic<bool>& cancelled) override;

 private:
  const std::string models_dir_;
  const std::shared_ptr<DaemonModelHost> host_;
};

}  // namespace hearth::daemon
