#include "fetch/hub.h"

#include <catch2/catch.hpp>

#include "fetch/http.h"
#include "fetch/hub_catalog.h"

using namespace hearth;
using namespace hearth::fetch;

namespace {

HubFile file(std::string path, std::string sha = std::string(64, 'a')) {
  return HubFile{std::move(path), 100, std::move(sha)};
}

const std::vector<HubFile> kRepo = {
    file(".gitattributes", ""),
    file("Qwen3-8B-Q4_K_M.gguf"),
    file("Qwen3-8B-Q8_0.gguf"),
    file("Qwen3-8B-Q4_K_S.gguf"),
    file("mmproj-Qwen3-8B-Q4_K_M.gguf"),
    file("big/Qwen3-8B-Q6_K-00002-of-00002.gguf"),
    file("big/Qwen3-8B-Q6_K-00001-of-00002.gguf"),
};

}  // namespace

TEST_CASE("hub names: quantization, file, URL and the default quantization", "[fetch]") {
  Result<HubName> q = parse_hub_name("hf.co/Qwen/Qwen3-8B-GGUF:q4_k_m");
  REQUIRE(q.ok());
  CHECK(q->repo == "Qwen/Qwen3-8B-GGUF");
  CHECK(q->quant == "q4_k_m");
  CHECK(q->file.empty());
  CHECK(q->revision == "main");
  CHECK(q->endpoint.empty());

  Result<HubName> f = parse_hub_name("huggingface.co/org/repo/sub/x-Q8_0.gguf");
  REQUIRE(f.ok());
  CHECK(f->repo == "org/repo");
  CHECK(f->file == "sub/x-Q8_0.gguf");
  CHECK(f->quant.empty());

  Result<HubName> u = parse_hub_name("https://mirror.example:8443/org/repo/resolve/v1.0/x.gguf?download=true");
  REQUIRE(u.ok());
  CHECK(u->endpoint == "https://mirror.example:8443");
  CHECK(u->repo == "org/repo");
  CHECK(u->revision == "v1.0");
  CHECK(u->file == "x.gguf");

  Result<HubName> d = parse_hub_name("hf.co/org/repo");
  REQUIRE(d.ok());
  CHECK(d->quant == "Q4_K_M");
}

TEST_CASE("hub names: malformed ones are errors that say what is wrong", "[fetch]") {
  CHECK(!parse_hub_name("hf.co/onlyorg").ok());
  CHECK(!parse_hub_name("hf.co/org/repo:").ok());
  CHECK(!parse_hub_name("hf.co/org/repo/model.safetensors").ok());
  CHECK(!parse_hub_name("hf.co/org/repo/x.gguf:Q4_K_M").ok());
  CHECK(!parse_hub_name("hf.co/org/repo/../../etc/x.gguf").ok());
  CHECK(!parse_hub_name("https://host/org/repo/blob/main/x.gguf").ok());
  CHECK(!parse_hub_name("hf.co/o rg/repo:Q4_K_M").ok());
  CHECK(is_hub_name("hf.co/a/b"));
  CHECK(is_hub_name("HTTPS://x/a/b/resolve/main/c.gguf"));
  CHECK(!is_hub_name("qwen3:8b"));
}

TEST_CASE("choose_model matches a quantization as a whole part of the name, any case", "[fetch]") {
  HubName n;
  n.repo = "Qwen/Qwen3-8B-GGUF";
  n.quant = "q4_k_m";
  Result<HubModel> m = choose_model(n, kRepo);
  REQUIRE(m.ok());
  REQUIRE(m->n_parts() == 1);
  CHECK(m->files[0].path == "Qwen3-8B-Q4_K_M.gguf");  // not the mmproj file, not Q4_K_S

  n.quant = "Q4_K";  // a prefix of two quantizations, the whole of none
  Result<HubModel> none = choose_model(n, kRepo);
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("Q4_K_M, Q4_K_S, Q6_K, Q8_0") != std::string::npos);
}

TEST_CASE("no quantization named: Q4_K_M, else the repo's only one, else an error", "[fetch]") {
  Result<HubName> n = parse_hub_name("hf.co/Qwen/Qwen3-0.6B-GGUF");
  REQUIRE(n.ok());
  CHECK(!n->quant_given);
  Result<HubModel> only = choose_model(*n, {file("Qwen3-0.6B-Q8_0.gguf"), file("README.md", "")});
  REQUIRE(only.ok());
  CHECK(only->files[0].path == "Qwen3-0.6B-Q8_0.gguf");
  CHECK(choose_model(*n, kRepo)->files[0].path == "Qwen3-8B-Q4_K_M.gguf");
  Result<HubModel> two = choose_model(*n, {file("x-Q8_0.gguf"), file("x-F16.gguf")});
  REQUIRE(!two.ok());
  CHECK(two.error().message.find("F16, Q8_0") != std::string::npos);
  Result<HubName> given = parse_hub_name("hf.co/Qwen/Qwen3-0.6B-GGUF:Q4_K_M");
  CHECK(!choose_model(*given, {file("Qwen3-0.6B-Q8_0.gguf")}).ok());  // asked for, so not replaced
}

TEST_CASE("choose_model gathers a split model's parts in order", "[fetch]") {
  HubName n;
  n.repo = "Qwen/Qwen3-8B-GGUF";
  n.quant = "Q6_K";
  Result<HubModel> m = choose_model(n, kRepo);
  REQUIRE(m.ok());
  REQUIRE(m->n_parts() == 2);
  CHECK(m->files[0].path == "big/Qwen3-8B-Q6_K-00001-of-00002.gguf");
  CHECK(m->files[1].path == "big/Qwen3-8B-Q6_K-00002-of-00002.gguf");

  std::vector<HubFile> missing = {file("big/Qwen3-8B-Q6_K-00001-of-00003.gguf"),
                                  file("big/Qwen3-8B-Q6_K-00003-of-00003.gguf")};
  Result<HubModel> broken = choose_model(n, missing);
  REQUIRE(!broken.ok());
  CHECK(broken.error().message.find("part 2 of 3") != std::string::npos);
}

TEST_CASE("choose_model: several matches and a missing file are errors naming them", "[fetch]") {
  HubName n;
  n.repo = "org/r";
  n.quant = "Q4_K_M";
  std::vector<HubFile> two = {file("a-Q4_K_M.gguf"), file("a-UD-Q4_K_M.gguf")};
  Result<HubModel> m = choose_model(n, two);
  REQUIRE(!m.ok());
  CHECK(m.error().message.find("a-Q4_K_M.gguf, a-UD-Q4_K_M.gguf") != std::string::npos);

  n.quant.clear();
  n.file = "b.gguf";
  Result<HubModel> f = choose_model(n, two);
  REQUIRE(!f.ok());
  CHECK(f.error().message.find("no file b.gguf") != std::string::npos);
  n.file = "a-UD-Q4_K_M.gguf";
  REQUIRE(choose_model(n, two).ok());
}

TEST_CASE("quant_of reads the last part of a GGUF file's name", "[fetch]") {
  CHECK(quant_of("Qwen3-8B-Q4_K_M.gguf") == "Q4_K_M");
  CHECK(quant_of("dir/x.Q8_0.gguf") == "Q8_0");
  CHECK(quant_of("x-IQ4_XS-00001-of-00002.gguf") == "IQ4_XS");
  CHECK(quant_of("README.md").empty());
}

TEST_CASE("the tree listing: LFS files carry their SHA-256 and size, directories are skipped", "[fetch]") {
  const std::string sha(64, 'b');
  Result<std::vector<HubFile>> r = parse_tree_listing(
      R"([{"type":"directory","oid":"x","size":0,"path":"sub"},
          {"type":"file","oid":"y","size":12,"path":"README.md"},
          {"type":"file","oid":"z","size":135,"path":"m.gguf",
           "lfs":{"oid":")" +
      sha + R"(","size":5027784448,"pointerSize":135}}])");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].sha256.empty());
  CHECK((*r)[1].bytes == 5027784448ull);
  CHECK((*r)[1].sha256 == sha);

  CHECK(!parse_tree_listing("{\"error\":\"x\"}").ok());
  CHECK(!parse_tree_listing("[{\"type\":\"file\",\"path\":\"m\"}]").ok());
  CHECK(!parse_tree_listing(R"([{"type":"file","path":"m","size":1,"lfs":{"oid":"abc"}}])").ok());
  CHECK(!parse_tree_listing("[").ok());
  // An entry whose type is not a string is not a file (pull_fuzz found this one throwing).
  Result<std::vector<HubFile>> odd = parse_tree_listing(R"([{"type":7,"path":"m.gguf","size":1}])");
  REQUIRE(odd.ok());
  CHECK(odd->empty());
}

TEST_CASE("URLs: the Hub's routes, and redirects relative and absolute", "[fetch]") {
  HubName n;
  n.repo = "org/repo";
  n.revision = "main";
  CHECK(resolve_url("https://huggingface.co", n, "sub/a b.gguf") ==
        "https://huggingface.co/org/repo/resolve/main/sub/a%20b.gguf");
  CHECK(tree_url("http://127.0.0.1:9", n) == "http://127.0.0.1:9/api/models/org/repo/tree/main?recursive=true");

  Result<Url> u = parse_url("https://huggingface.co/org/repo/resolve/main/x.gguf");
  REQUIRE(u.ok());
  CHECK(u->port == "443");
  CHECK(u->origin() == "https://huggingface.co");
  Result<Url> abs = resolve_location(*u, "https://cdn-lfs.hf.co/repos/ab/cd?X-Amz=1");
  REQUIRE(abs.ok());
  CHECK(abs->host == "cdn-lfs.hf.co");
  CHECK(abs->target == "/repos/ab/cd?X-Amz=1");
  Result<Url> rel = resolve_location(*u, "/api/resolve-cache/x");
  REQUIRE(rel.ok());
  CHECK(rel->origin() == "https://huggingface.co");
  CHECK(rel->target == "/api/resolve-cache/x");
  CHECK(!parse_url("ftp://x/y").ok());
  CHECK(!parse_url("http://user@x/y").ok());
  CHECK(!parse_url("http://x:99999999/").ok());
}

TEST_CASE("the Hub catalog's names are unique and their files are GGUF", "[fetch]") {
  for (const HubCatalogModel& m : hub_catalog()) {
    CHECK(find_hub_catalog_model(m.name) == &m);
    Result<HubName> n = parse_hub_name(hub_name_of(m));
    REQUIRE(n.ok());
    CHECK(n->file == m.file);
    CHECK(m.ram_gib > m.file_gib);
  }
}
