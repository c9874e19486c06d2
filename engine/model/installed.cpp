#include "engine/model/installed.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <system_error>

#include "engine/gguf/gguf.h"
#include "engine/model/architecture.h"
#include "engine/model/catalog.h"
#include "engine/model/sampling_defaults.h"

namespace hearth {

namespace fs = std::filesystem;

std::string file_type_name(int64_t t) {
  // llama.h's LLAMA_FTYPE_* values, which writers store in general.file_type.
  static const char* const kNames[] = {
      "F32",    "F16",    "Q4_0",   "Q4_1",    "",       "",       "",       "Q8_0",   "Q5_0",     "Q5_1",
      "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L",  "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",     "IQ2_XXS",
      "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S",  "IQ3_M",  "IQ2_S",    "IQ2_M",
      "IQ4_XS", "IQ1_M",  "BF16",   "",        "",       "",       "TQ1_0",  "TQ2_0",  "MXFP4_MOE"};
  if (t < 0 || t >= static_cast<int64_t>(std::size(kNames))) return "";
  return kNames[t];
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return a == b || std::filesystem::equivalent(a, b, ec);
}

namespace {

// What the listing says of a file before reading it: its names and its size and time.
InstalledModel named_model(const std::string& path) {
  InstalledModel m;
  const fs::path p(path);
  m.path = path;
  m.file = p.filename().string();
  m.id = p.stem().string();
  for (const CatalogModel& c : catalog())
    if (c.file == m.file) {
      m.id = m.catalog_name = c.name;
      break;
    }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    m.bytes = static_cast<int64_t>(st.st_size);
    m.modified = static_cast<int64_t>(st.st_mtime);
  }
  return m;
}

// The rest, from the file's metadata.
void describe(const gguf::File& g, InstalledModel& m) {
  if (Result<std::string_view> a = g.get_string("general.architecture")) m.arch = std::string(*a);
  if (Result<std::string_view> n = g.get_string("general.name")) m.name = std::string(*n);
  if (Result<int64_t> t = g.get_int("general.file_type")) m.quantization = file_type_name(*t);
  for (const gguf::TensorInfo& t : g.tensors()) m.parameters += t.n_elements();
  ModelConfig config;
  if (Result<const Architecture*> arch = read_model_config(g, config); !arch) {
    m.error = arch.error().message;
    return;
  }
  m.context_length = config.n_ctx_train;
  std::vector<std::string> ignored;  // a listing shows the defaults in force, not the file's faults
  m.sampling = model_sampling(g, m.catalog_name, &ignored);
  m.usable = true;
}

}  // namespace

InstalledModel inspect_model(const std::string& path) {
  InstalledModel m = named_model(path);
  Result<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f) {
    m.error = f.error().message;
    return m;
  }
  describe(**f, m);
  return m;
}

InstalledModel inspect_model(const std::string& path, const gguf::File& file) {
  InstalledModel m = named_model(path);
  describe(file, m);
  return m;
}

std::vector<InstalledModel> scan_models(const std::string& dir) {
  std::vector<InstalledModel> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".gguf" || !it->is_regular_file(ec)) continue;
    out.push_back(inspect_model(p.string()));
  }
  std::sort(out.begin(), out.end(), [](const InstalledModel& a, const InstalledModel& b) {
    return a.id != b.id ? a.id < b.id : a.file < b.file;
  });
  return out;
}

}  // namespace hearth
