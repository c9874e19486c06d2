#include "engine/model/catalog.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace hearth {

// Generated at configure time from packaging/models.tsv (engine/model/catalog_data.cpp.in).
extern const char* const kCatalogTsv;

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  for (std::string& w : split(s, ' '))
    if (!w.empty()) out.push_back(std::move(w));
  return out;
}

bool is_sha256(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<std::vector<CatalogModel>> parse_catalog(std::string_view tsv) {
  std::vector<CatalogModel> out;
  std::set<std::string> names, files;
  size_t line_no = 0;
  for (std::string line : split(tsv, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "model catalog line " + std::to_string(line_no);
    std::vector<std::string> f = split(line, '\t');
    if (f.size() != 8) {
      return make_error(where + ": " + std::to_string(f.size()) +
                        " tab-separated fields; expected 8 (name file bytes sha256 license packages members about)");
    }
    CatalogModel m;
    m.name = f[0];
    m.file = f[1];
    const char* end = f[2].data() + f[2].size();
    auto [p, ec] = std::from_chars(f[2].data(), end, m.bytes);
    if (f[2].empty() || ec != std::errc() || p != end || m.bytes <= 0)
      return make_error(where + ": bytes '" + f[2] + "' is not a positive integer");
    m.sha256 = f[3];
    if (!is_sha256(m.sha256)) return make_error(where + ": sha256 '" + m.sha256 + "' is not 64 lower-case hex digits");
    m.license = f[4];
    m.packages = words(f[5]);
    m.members = words(f[6]);
    m.about = f[7];
    m.sampling = catalog_sampling(m.name);
    if (m.name.empty() || m.name.find(' ') != std::string::npos) return make_error(where + ": empty or spaced name");
    if (m.file.empty() || m.file.find('/') != std::string::npos)
      return make_error(where + ": file '" + m.file + "' must be a plain file name");
    if (m.packages.empty() || m.members.empty()) return make_error(where + ": no packages or no members");
    if (!names.insert(m.name).second) return make_error(where + ": name '" + m.name + "' appears twice");
    if (!files.insert(m.file).second) return make_error(where + ": file '" + m.file + "' appears twice");
    out.push_back(std::move(m));
  }
  if (out.empty()) return make_error("the model catalog lists no model");
  return out;
}

const std::vector<CatalogModel>& catalog() {
  static const std::vector<CatalogModel> kCatalog = [] {
    Result<std::vector<CatalogModel>> r = parse_catalog(kCatalogTsv);
    // packaging/models.tsv is part of the source; the catalog test parses it, so a broken
    // one never ships. Should it happen anyway, say so and stop rather than run nameless.
    if (!r.ok()) {
      std::fprintf(stderr, "hearth: built-in model catalog: %s\n", r.error().message.c_str());
      std::abort();
    }
    return std::move(*r);
  }();
  return kCatalog;
}

const CatalogModel& default_catalog_model() {
  return catalog().front();
}

const CatalogModel* find_catalog_model(std::string_view name) {
  for (const CatalogModel& m : catalog())
    if (m.name == name) return &m;
  return nullptr;
}

std::string catalog_names() {
  std::string out;
  for (const CatalogModel& m : catalog()) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace hearth
