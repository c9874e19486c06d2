#include "daemon/engine_loader.h"

#include <sys/stat.h>

#include <filesystem>

#include "common/log.h"
#include "daemon/devices.h"
#include "engine/model/catalog.h"
#include "engine/model/model_path.h"
#include "engine/model/sampling_defaults.h"
#include "fetch/pulled.h"

namespace hearth::daemon {

std::string model_id_from_path(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  constexpr std::string_view kExt = ".gguf";
  if (name.size() > kExt.size() && name.compare(name.size() - kExt.size(), kExt.size(), kExt) == 0)
    name.resize(name.size() - kExt.size());
  return name;
}

ModelNames model_names(const std::string& path) {
  ModelNames n;
  const std::string file_name = std::filesystem::path(path).filename().string();
  for (const CatalogModel& m : catalog()) {
    if (m.file != file_name) continue;
    if (n.id.empty()) {
      n.id = m.name;
    } else {
      n.aliases.push_back(m.name);
    }
  }
  for (std::string& hub : fetch::pulled_names(std::filesystem::path(path).parent_path().string(), file_name))
    n.aliases.push_back(std::move(hub));
  const std::string stem = model_id_from_path(path);
  if (n.id.empty()) {
    n.id = stem;
  } else {
    n.aliases.push_back(stem);
  }
  return n;
}

Result<std::string> resolve_model_arg(const std::string& arg) {
  if (std::optional<Result<std::string>> pulled = fetch::find_pulled(models_dir(), arg)) return std::move(*pulled);
  return resolve_model(arg);
}

Result<LoadedEngine> load_engine(const std::string& model_arg, const BackendChoice& backend_choice,
                                 const std::string& chat_template) {
  Result<std::string> path = resolve_model_arg(model_arg);
  if (!path) return path.error();
  LoadedEngine e;
  Result<std::unique_ptr<Backend>> backend = make_backend(backend_choice);
  if (!backend) return backend.error();
  e.backend = std::move(*backend);

  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(*path);
  if (!file) return file.error();
  e.file = std::move(*file);
  Result<std::unique_ptr<Model>> model = Model::load(e.file, *e.backend);
  if (!model) return make_error(*path + ": " + model.error().message);
  e.model = std::move(*model);
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*e.file);
  if (!tok) return make_error(*path + ": tokenizer: " + tok.error().message);
  e.tokenizer = std::move(*tok);

  ModelNames names = model_names(*path);
  e.info.id = std::move(names.id);
  e.info.aliases = std::move(names.aliases);
  e.info.path = *path;
  e.info.arch = e.model->config().arch;
  e.info.backend = e.backend->info().kind;
  Result<ChatTemplate> tmpl = chat_template_for_model(*e.file, chat_template);
  if (!tmpl) return make_error(*path + ": chat template: " + tmpl.error().message);
  e.info.chat_template = std::move(*tmpl);
  LOG_INFO(std::string("chat template: ") + chat_family_name(e.info.chat_template.family) +
           (chat_template.empty() ? " (from the model)" : " (--chat-template)") +
           (e.info.chat_template.default_system.empty() ? "" : ", with the template's default system prompt"));
  std::vector<std::string> warnings;
  e.info.sampling = model_sampling(*e.file, e.info.id, &warnings);
  for (const std::string& w : warnings) LOG_WARN(*path + ": " + w);
  LOG_INFO("sampling defaults: " + describe_defaults(e.info.sampling));
  struct stat st {};
  if (::stat(path->c_str(), &st) == 0) e.info.created = static_cast<int64_t>(st.st_mtime);
  return e;
}

}  // namespace hearth::daemon
