#include "common/auth/sha256.h"

#include <doctest/doctest.h>

#include <string>

namespace dslaunch {
namespace {

std::string Hex(const Sha256Digest& d) { return HexEncode(DigestBytes(d)); }

TEST_CASE("Sha256Hash matches the FIPS 180-4 and NIST known answers") {
  struct Case {
    std::string input;
    const char* digest;
  };
  const Case cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      // Padding edge cases: 55 bytes fit the length in the last block, 56 need another block.
      {std::string(55, 'a'), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {std::string(56, 'a'), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {std::string(64, 'a'), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.input.size());
    CHECK(Hex(Sha256Hash(c.input)) == c.digest);
  }
}

TEST_CASE("Sha256 gives the same digest however the input is split into updates") {
  std::string input;
  for (int i = 0; i < 300; ++i) input.push_back(static_cast<char>(i * 7));
  std::string expected = Hex(Sha256Hash(input));
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 128u, 299u}) {
    CAPTURE(chunk);
    Sha256 h;
    for (size_t pos = 0; pos < input.size(); pos += chunk)
      h.Update(std::string_view(input).substr(pos, chunk));
    CHECK(Hex(h.Finish()) == expected);
  }
}

TEST_CASE("HmacSha256 matches the RFC 4231 test cases") {
  struct Case {
    int number;
    std::string key;
    std::string data;
    const char* mac;
  };
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4.push_back(static_cast<char>(i));
  const Case cases[] = {
      {1, std::string(20, '\x0b'), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {2, "Jefe", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {3, std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {4, key4, std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {6, std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {7, std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The "
       "key "
       "needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.number);
    CHECK(Hex(HmacSha256(c.key, c.data)) == c.mac);
  }
}

TEST_CASE("ConstantTimeEquals compares contents and lengths") {
  CHECK(ConstantTimeEquals("", ""));
  CHECK(ConstantTimeEquals("abc", "abc"));
  CHECK_FALSE(ConstantTimeEquals("abc", "abd"));
  CHECK_FALSE(ConstantTimeEquals("abc", "xbc"));
  CHECK_FALSE(ConstantTimeEquals("abc", "abcd"));
  CHECK_FALSE(ConstantTimeEquals("", "a"));
  CHECK(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  CHECK_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST_CASE("HexEncode writes two lower-case digits per byte") {
  CHECK(HexEncode("") == "");
  CHECK(HexEncode(std::string("\x00\x0f\xf0\xff", 4)) == "000ff0ff");
}

}  // namespace
}  // namespace dslaunch
