// The cache_salt an upstream gets for a caller (daemon/upstream_salt.h): HMAC-SHA256 of the
// caller's scope under hearthd's secret, the secret kept in a private file.
#include "daemon/upstream_salt.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace hearth::daemon;

TEST_CASE("the cache salt is HMAC-SHA256 of the scope under the secret, in hex", "[daemon][upstream]") {
  // RFC 4231 test case 2 (key "Jefe").
  CHECK(derive_cache_salt("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string secret(64, 'a');
  const std::string uid1000 = derive_cache_salt(secret, "uid:1000");
  CHECK(uid1000.size() == 64);
  CHECK(uid1000 == derive_cache_salt(secret, "uid:1000"));
  CHECK(uid1000 != derive_cache_salt(secret, "uid:1001"));
  CHECK(uid1000 != derive_cache_salt(secret, "uid:1000\nsalt:alice"));  // a client's salt folded in
  CHECK(uid1000 != derive_cache_salt(std::string(64, 'b'), "uid:1000"));
  CHECK(uid1000.find("1000") == std::string::npos);
}

TEST_CASE("the secret is created once, private, and read back the same", "[daemon][upstream]") {
  char tmpl[] = "/tmp/hearth_salt_test_XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(tmpl);
  const std::string path = (dir / "upstream-salt.secret").string();
  auto first = load_or_create_salt_secret(path);
  REQUIRE(first.ok());
  CHECK(first->size() == 64);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = load_or_create_salt_secret(path);
  REQUIRE(again.ok());
  CHECK(*again == *first);

  ::chmod(path.c_str(), 0644);
  auto open = load_or_create_salt_secret(path);
  REQUIRE_FALSE(open.ok());
  CHECK_THAT(open.error().message, Catch::Contains("chmod 600") && !Catch::Contains(*first));
  ::chmod(path.c_str(), 0600);
  std::ofstream(path) << "not a secret\n";
  CHECK_FALSE(load_or_create_salt_secret(path).ok());
  std::filesystem::remove_all(dir);
}
