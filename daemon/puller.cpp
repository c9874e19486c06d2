#include "daemon/puller.h"

#include <utility>

#include "common/log.h"
#include "fetch/pull.h"

namespace hearth::daemon {

namespace {

ipc::PullProgress::Kind kind_of(fetch::PullEvent::Kind k) {
  switch (k) {
    case fetch::PullEvent::Kind::kResolving:
      return ipc::PullProgress::Kind::Resolving;
    case fetch::PullEvent::Kind::kDownloading:
      return ipc::PullProgress::Kind::Downloading;
    case fetch::PullEvent::Kind::kVerifying:
      return ipc::PullProgress::Kind::Verifying;
    case fetch::PullEvent::Kind::kMessage:
      break;
  }
  return ipc::PullProgress::Kind::Message;
}

}  // namespace

DaemonPuller::DaemonPuller(std::string models_dir, std::shared_ptr<DaemonModelHost> host)
    : models_dir_(std::move(models_dir)), host_(std::move(host)) {}

Result<std::string> DaemonPuller::pull(const std::string& name,
                                       const std::function<void(const ipc::PullProgress&)>& on_progress,
                                       const std::atomic<bool>& cancelled) {
  fetch::PullOptions o;
  o.models_dir = models_dir_;
  o.cancel = &cancelled;
  o.on_event = [&on_progress](const fetch::PullEvent& e) {
    on_progress({kind_of(e.kind), e.file, e.sha256, e.completed, e.total, e.text});
  };
  LOG_INFO("pull: " + name + " into " + models_dir_);
  Result<fetch::PullResult> r = fetch::pull_model(name, o);
  if (!r) {
    LOG_WARN("pull: " + name + ": " + r.error().message);
    return r.error();
  }
  const std::string id = host_->add_installed(r->path);
  LOG_INFO("pull: " + name + " is " + r->path + (r->already_installed ? " (already installed)" : "") + ", served as " +
           id);
  return r->path;
}

}  // namespace hearth::daemon
