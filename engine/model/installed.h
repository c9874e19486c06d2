// The models installed in a folder: what `GET /api/models` and `hearth models` list. Each
// GGUF file is opened (mapped, its header and tensor table checked) and its metadata read
// without loading the weights, so a listing costs milliseconds per file and a broken or
// unsupported file is listed with the reason instead of failing the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling/defaults.h"

namespace hearth {

namespace gguf {
class File;
}  // namespace gguf

struct InstalledModel {
  // The catalog name where the file is a catalog model's ("smollm2:135m"), else the file
  // name without ".gguf".
  std::string id;
  std::string file;          // the file name in the folder
  std::string path;          // the folder joined with file
  std::string catalog_name;  // "" when the file is not in the catalog
  int64_t bytes = 0;
  int64_t modified = 0;  // unix seconds (the file's mtime)
  // Read from the file; empty or 0 when it could not be read.
  std::string arch;          // general.architecture
  std::string name;          // general.name
  std::string quantization;  // from general.file_type ("Q4_K_M"), else "" when absent
  int64_t parameters = 0;    // elements of all tensors
  int32_t context_length = 0;
  ModelSampling sampling;  // its sampling defaults (model_sampling(): the file's, else the catalog's)
  // Whether this hearth can serve it; when not, why (not GGUF, damaged, an architecture
  // hearth does not implement, unreadable).
  bool usable = false;
  std::string error;
};

// Every regular *.gguf file in dir (symbolic links followed), sorted by id. A folder that
// does not exist is an empty list; one that cannot be read is too (nothing is installed that
// could be served).
std::vector<InstalledModel> scan_models(const std::string& dir);

// One file, as scan_models lists it.
InstalledModel inspect_model(const std::string& path);
// The same from the file at path, already open (not read again).
InstalledModel inspect_model(const std::string& path, const gguf::File& file);

// Whether two paths name one file (a model given by another path than the folder's).
bool same_file(const std::string& a, const std::string& b);

// llama.cpp's name of a general.file_type value ("Q4_K_M" for 15), or "" when unknown.
std::string file_type_name(int64_t file_type);

}  // namespace hearth
