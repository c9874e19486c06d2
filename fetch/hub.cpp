#include "fetch/hub.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace hearth::fetch {

namespace {

const char* const kDefaultQuant = "Q4_K_M";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ends_with_gguf(std::string_view s) {
  return s.size() > 5 && lower(s.substr(s.size() - 5)) == ".gguf";
}

bool valid_repo_part(std::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// "ORG/REPO[/PATH]" after the host: the repo and the rest.
Status split_repo(std::string_view s, std::string_view whole, std::string* repo, std::string* rest) {
  const size_t a = s.find('/');
  const size_t b = a == std::string_view::npos ? a : s.find('/', a + 1);
  std::string_view org = s.substr(0, a);
  std::string_view name =
      a == std::string_view::npos ? "" : s.substr(a + 1, b == std::string_view::npos ? b : b - a - 1);
  if (!valid_repo_part(org) || !valid_repo_part(name))
    return make_error("'" + std::string(whole) + "' does not name a Hugging Face repo as hf.co/ORG/REPO");
  *repo = std::string(org) + "/" + std::string(name);
  *rest = b == std::string_view::npos ? "" : std::string(s.substr(b + 1));
  return Status{};
}

// The part numbers of a split file's name: "-00001-of-00003.gguf" gives {1, 3}; {0, 0} else.
std::pair<int, int> split_numbers(std::string_view path) {
  const std::string l = lower(path);
  if (l.size() < 25 || l.compare(l.size() - 5, 5, ".gguf") != 0) return {0, 0};
  const std::string tail = l.substr(l.size() - 20, 15);  // "-00001-of-00003"
  if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return {0, 0};
  for (int i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14})
    if (!std::isdigit(static_cast<unsigned char>(tail[i]))) return {0, 0};
  return {std::atoi(tail.substr(1, 5).c_str()), std::atoi(tail.substr(10, 5).c_str())};
}

// The file name without folders, ".gguf" and a split suffix.
std::string stem_of(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  base = base.substr(0, base.size() - 5);
  if (split_numbers(path).second > 0) base = base.substr(0, base.size() - 15);
  return std::string(base);
}

bool is_mmproj(std::string_view path) {
  return lower(path).find("mmproj") != std::string::npos;
}

// Whether quant is a whole part of the stem: bounded by its start or end, '-', '.' or '/'.
bool has_quant(const std::string& stem, const std::string& quant) {
  const std::string s = lower(stem), q = lower(quant);
  for (size_t p = s.find(q); p != std::string::npos; p = s.find(q, p + 1)) {
    const bool left = p == 0 || s[p - 1] == '-' || s[p - 1] == '.';
    const size_t e = p + q.size();
    const bool right = e == s.size() || s[e] == '-' || s[e] == '.';
    if (left && right) return true;
  }
  return false;
}

std::string percent_encode_path(std::string_view path) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::set<std::string> quants_of(const std::vector<HubFile>& files) {
  std::set<std::string> quants;
  for (const HubFile& f : files)
    if (ends_with_gguf(f.path) && !is_mmproj(f.path)) quants.insert(quant_of(f.path));
  return quants;
}

std::string list_quants(const std::vector<HubFile>& files) {
  std::string out;
  for (const std::string& q : quants_of(files)) out += (out.empty() ? "" : ", ") + q;
  return out.empty() ? "none: the repo has no .gguf file" : out;
}

// The parts of the split set that `first` begins, in order; an error when one is missing.
Result<HubModel> gather_parts(const HubFile& first, const std::vector<HubFile>& files, const std::string& repo) {
  HubModel m;
  const int n = split_numbers(first.path).second;
  const std::string prefix = first.path.substr(0, first.path.size() - 20);
  for (int i = 1; i <= n; ++i) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d", i, n);
    auto it = std::find_if(files.begin(), files.end(), [&](const HubFile& f) {
      return f.path.size() == first.path.size() && f.path.compare(0, prefix.size(), prefix) == 0 &&
             lower(f.path.substr(prefix.size(), 15)) == suffix;
    });
    if (it == files.end())
      return make_error(repo + ": part " + std::to_string(i) + " of " + std::to_string(n) + " of " +
                        stem_of(first.path) + " is missing from the repo");
    m.files.push_back(*it);
  }
  return m;
}

}  // namespace

bool is_hub_name(std::string_view name) {
  const std::string l = lower(name.substr(0, 20));
  return l.rfind("hf.co/", 0) == 0 || l.rfind("huggingface.co/", 0) == 0 || l.rfind("http://", 0) == 0 ||
         l.rfind("https://", 0) == 0;
}

Result<HubName> parse_hub_name(std::string_view name) {
  HubName h;
  const std::string l = lower(name);
  std::string rest;
  if (l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0) {
    const size_t host_end = name.find('/', name.find("://") + 3);
    if (host_end == std::string_view::npos) return make_error("'" + std::string(name) + "' names no file");
    h.endpoint = std::string(name.substr(0, host_end));
    if (Status s = split_repo(name.substr(host_end + 1), name, &h.repo, &rest); !s) return s.error();
    const size_t q = rest.find_first_of("?#");
    if (q != std::string::npos) rest.resize(q);
    if (rest.rfind("resolve/", 0) != 0 || rest.find('/', 8) == std::string::npos)
      return make_error("'" + std::string(name) +
                        "' is not a Hub download URL (…/ORG/REPO/resolve/REVISION/FILE.gguf)");
    const size_t slash = rest.find('/', 8);
    h.revision = rest.substr(8, slash - 8);
    h.file = rest.substr(slash + 1);
  } else {
    // "ORG/REPO:QUANT": the quantization follows the repo after a ':'.
    std::string_view path = name.substr(name.find('/') + 1);
    if (const size_t colon = path.rfind(':'); colon != std::string_view::npos) {
      h.quant = std::string(path.substr(colon + 1));
      path = path.substr(0, colon);
      if (h.quant.empty()) return make_error("'" + std::string(name) + "': empty quantization after ':'");
    }
    if (Status s = split_repo(path, name, &h.repo, &rest); !s) return s.error();
    if (!rest.empty() && !h.quant.empty())
      return make_error("'" + std::string(name) + "': name a file or a quantization, not both");
    h.file = rest;
  }
  if (!h.file.empty() && !ends_with_gguf(h.file))
    return make_error("'" + std::string(name) + "': hearth pulls GGUF files (FILE.gguf)");
  if (h.file.find("..") != std::string::npos) return make_error("'" + std::string(name) + "': '..' in a file path");
  h.quant_given = !h.quant.empty();
  if (h.file.empty() && h.quant.empty()) h.quant = kDefaultQuant;
  return h;
}

Result<std::vector<HubFile>> parse_tree_listing(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return make_error("the Hub's file listing is not a JSON array");
  std::vector<HubFile> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_object()) continue;
    // find(), not value(): value() throws when "type" is there but not a string.
    const auto type = e.find("type");
    if (type == e.end() || !type->is_string() || type->get<std::string>() != "file") continue;
    HubFile f;
    if (!e.contains("path") || !e["path"].is_string() || !e.contains("size") || !e["size"].is_number_unsigned())
      return make_error("the Hub's file listing has an entry without a path or size");
    f.path = e["path"].get<std::string>();
    f.bytes = e["size"].get<uint64_t>();
    if (e.contains("lfs") && e["lfs"].is_object() && e["lfs"].contains("oid") && e["lfs"]["oid"].is_string()) {
      f.sha256 = lower(e["lfs"]["oid"].get<std::string>());
      if (f.sha256.size() != 64 || f.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
        return make_error("the Hub's listing gives " + f.path + " a SHA-256 that is not 64 hex digits");
      // The file's own size; the entry's "size" may be the LFS pointer's in some listings.
      if (e["lfs"].contains("size") && e["lfs"]["size"].is_number_unsigned())
        f.bytes = e["lfs"]["size"].get<uint64_t>();
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::string quant_of(std::string_view path) {
  if (!ends_with_gguf(path)) return "";
  const std::string stem = stem_of(path);
  const size_t p = stem.find_last_of("-.");
  return p == std::string::npos ? stem : stem.substr(p + 1);
}

Result<HubModel> choose_model(const HubName& name, const std::vector<HubFile>& files) {
  const HubFile* pick = nullptr;
  if (!name.file.empty()) {
    for (const HubFile& f : files)
      if (f.path == name.file) pick = &f;
    if (!pick)
      return make_error(name.repo + " has no file " + name.file + " (its quantizations: " + list_quants(files) + ")");
  } else {
    std::vector<const HubFile*> matches;  // single files and first parts
    for (const HubFile& f : files) {
      if (!ends_with_gguf(f.path) || is_mmproj(f.path) || split_numbers(f.path).first > 1) continue;
      if (has_quant(stem_of(f.path), name.quant)) matches.push_back(&f);
    }
    if (matches.empty() && !name.quant_given && quants_of(files).size() == 1) {
      HubName only = name;
      only.quant = *quants_of(files).begin();
      only.quant_given = true;
      return choose_model(only, files);
    }
    if (matches.empty())
      return make_error(name.repo + " has no " + name.quant + " file; its quantizations: " + list_quants(files));
    if (matches.size() > 1) {
      std::string names;
      for (const HubFile* f : matches) names += (names.empty() ? "" : ", ") + f->path;
      return make_error(name.repo + " has several " + name.quant + " files (" + names + "); name one as hf.co/" +
                        name.repo + "/FILE.gguf");
    }
    pick = matches[0];
  }
  if (split_numbers(pick->path).second > 0) {
    if (split_numbers(pick->path).first != 1)
      return make_error(pick->path + " is one part of a split model; name its first part (-00001-of-…)");
    return gather_parts(*pick, files, name.repo);
  }
  return HubModel{{*pick}};
}

std::string resolve_url(const std::string& endpoint, const HubName& name, const std::string& path) {
  return endpoint + "/" + name.repo + "/resolve/" + percent_encode_path(name.revision) + "/" +
         percent_encode_path(path);
}

std::string tree_url(const std::string& endpoint, const HubName& name) {
  return endpoint + "/api/models/" + name.repo + "/tree/" + percent_encode_path(name.revision) + "?recursive=true";
}

std::string hub_endpoint() {
  std::string e = "https://huggingface.co";
  if (const char* v = std::getenv("HF_ENDPOINT"); v && *v) e = v;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

}  // namespace hearth::fetch
