#include "fetch/pulled.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "fetch/hub_catalog.h"

namespace hearth::fetch {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string records_dir(const std::string& models_dir) {
  return models_dir + "/.pulled";
}

// The name of a repo and quantization as written in records: "hf.co/org/repo:q4_k_m", or
// "hf.co/org/repo" for its default quantization.
std::string canonical(const HubName& h) {
  return lower("hf.co/" + h.repo + (h.quant_given ? ":" + h.quant : ""));
}

std::string record_path(const std::string& models_dir, const HubName& h) {
  std::string key = canonical(h);
  std::replace(key.begin(), key.end(), '/', '~');
  std::replace(key.begin(), key.end(), ':', '=');
  return records_dir(models_dir) + "/" + key;
}

// A recorded file name: a plain .gguf name in the folder, nothing else.
bool plain_file_name(const std::string& f) {
  return !f.empty() && f.find('/') == std::string::npos && f != "." && f != ".." && !quant_of(f).empty();
}

struct Record {
  std::string file;  // "" when the record is unreadable or holds no plain file name
  std::string name;  // as the pull gave it
};

Record read_record(const std::string& path) {
  std::ifstream in(path);
  Record r;
  if (!in || !std::getline(in, r.file) || !plain_file_name(r.file)) return {};
  std::getline(in, r.name);
  return r;
}

// Files pulled before records: the one file with the quantization whose name starts with
// the repo's name (less "-GGUF"), or "" when none or several.
std::string guess(const std::string& models_dir, const HubName& h) {
  std::string stem = lower(h.repo.substr(h.repo.find('/') + 1));
  for (const char* suffix : {"-gguf", "_gguf", ".gguf"})
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, suffix) == 0) stem.resize(stem.size() - 5);
  std::string found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(models_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (lower(f).rfind(stem, 0) != 0 || lower(quant_of(f)) != lower(h.quant) || !e.is_regular_file(ec)) continue;
    if (!found.empty()) return "";
    found = f;
  }
  return found;
}

Result<std::string> installed_or_error(const std::string& models_dir, const std::string& file, std::string_view name) {
  const std::string path = models_dir + "/" + file;
  std::error_code ec;
  if (!file.empty() && fs::is_regular_file(path, ec)) return path;
  return make_error("the model '" + std::string(name) + "' is not installed" +
                    (file.empty() ? " in " + models_dir : " (" + path + " is missing)") +
                    "; download it with: hearth pull " + std::string(name));
}

}  // namespace

void record_pull(const std::string& models_dir, std::string_view name, const std::string& file) {
  if (!is_hub_name(name) || !plain_file_name(file)) return;
  Result<HubName> h = parse_hub_name(name);
  if (!h || !h->file.empty()) return;
  std::error_code ec;
  fs::create_directories(records_dir(models_dir), ec);
  const std::string path = record_path(models_dir, *h), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << file << "\n" << name << "\n";
    if (!out.flush()) return;
  }
  fs::rename(tmp, path, ec);
}

std::optional<Result<std::string>> find_pulled(const std::string& models_dir, std::string_view name) {
  if (const HubCatalogModel* m = find_hub_catalog_model(name)) return installed_or_error(models_dir, m->file, name);
  if (!is_hub_name(name)) return std::nullopt;
  Result<HubName> h = parse_hub_name(name);
  if (!h) return Result<std::string>(h.error());
  if (!h->file.empty()) return installed_or_error(models_dir, fs::path(h->file).filename().string(), name);
  std::string file = read_record(record_path(models_dir, *h)).file;
  if (file.empty()) file = guess(models_dir, *h);
  return installed_or_error(models_dir, file, name);
}

std::vector<std::string> pulled_names(const std::string& models_dir, const std::string& file) {
  std::vector<std::string> names;
  for (const HubCatalogModel& m : hub_catalog())
    if (file == m.file) names.emplace_back(m.name);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(records_dir(models_dir), ec)) {
    const std::string key = e.path().filename().string();
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".tmp") == 0) continue;
    Record r = read_record(e.path().string());
    if (r.file == file && is_hub_name(r.name)) names.push_back(std::move(r.name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace hearth::fetch
