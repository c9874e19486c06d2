// Names of models on the Hugging Face Hub, and the Hub's file listing:
//   hf.co/ORG/REPO:QUANT          the repo's .gguf file of that quantization ("Q4_K_M", any case)
//   hf.co/ORG/REPO                the same with Q4_K_M (as Ollama does), or the repo's only
//                                 quantization when it has no Q4_K_M
//   hf.co/ORG/REPO/PATH.gguf      that file
//   https://HOST/ORG/REPO/resolve/REV/PATH.gguf   a download URL (HOST then is the endpoint)
// (huggingface.co/ is taken for hf.co/.) The file's size and SHA-256 come from the Hub's API,
// GET {endpoint}/api/models/{repo}/tree/{rev}?recursive=true: a JSON array of
// {"type": "file", "path", "size", "lfs": {"oid": sha256, "size"}} entries (an LFS file's
// size is taken from "lfs").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth::fetch {

struct HubName {
  std::string endpoint;  // "" = the configured one (HF_ENDPOINT); set by a URL
  std::string repo;      // "ORG/REPO"
  std::string revision = "main";
  std::string file;          // a path in the repo, or ""
  std::string quant;         // when file is "": the quantization wanted ("Q4_K_M")
  bool quant_given = false;  // false: quant is the default; a repo without it but with one
                             // quantization only gives that one
};

// Whether a name is one of the forms above (catalog names are not).
bool is_hub_name(std::string_view name);
Result<HubName> parse_hub_name(std::string_view name);

struct HubFile {
  std::string path;  // in the repo
  uint64_t bytes = 0;
  std::string sha256;  // lower-case hex; "" for a file kept outside LFS
};

// The listing's JSON (the tree API's answer) as files; directories are skipped.
Result<std::vector<HubFile>> parse_tree_listing(std::string_view json);

// A model in a repo: one .gguf file, or the parts of a split one in order.
struct HubModel {
  std::vector<HubFile> files;
  int n_parts() const { return static_cast<int>(files.size()); }
};

// The model the name means in this listing: the file it names, or the .gguf file (or split
// set) of its quantization, matched case-insensitively as a whole dash- or dot-separated part
// of the file name; mmproj (vision projector) files are never chosen. An error lists the
// quantizations the repo has when none or several match.
Result<HubModel> choose_model(const HubName& name, const std::vector<HubFile>& files);

// "Q4_K_M" from "Qwen3-8B-Q4_K_M.gguf" or "x-Q8_0-00001-of-00003.gguf": the file's last dash-
// or dot-separated part before ".gguf" and any split suffix; "" when not a .gguf file.
std::string quant_of(std::string_view path);

// {endpoint}/ORG/REPO/resolve/REV/PATH and {endpoint}/api/models/ORG/REPO/tree/REV?recursive=true
std::string resolve_url(const std::string& endpoint, const HubName& name, const std::string& path);
std::string tree_url(const std::string& endpoint, const HubName& name);

// The endpoint from HF_ENDPOINT (without a trailing '/'), else https://huggingface.co.
std::string hub_endpoint();

}  // namespace hearth::fetch
