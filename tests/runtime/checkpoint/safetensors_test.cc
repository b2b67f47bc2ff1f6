#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/crc32c.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string LittleEndian64(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// A file made by hand per the specification: length, header text as given, data.
std::string RawFile(std::string_view header, std::string_view data) {
  return LittleEndian64(header.size()) + std::string(header) + std::string(data);
}

template <typename T>
TensorData Tensor(std::string name, std::string dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return {std::move(name), std::move(dtype), std::move(shape), values.data(), values.size() * sizeof(T)};
}

template <typename T>
std::vector<T> ReadAll(const SafetensorsFile& file, const SafetensorsTensor& t) {
  std::vector<T> out(t.bytes() / sizeof(T));
  REQUIRE(file.Read(t, 0, out.data(), t.bytes()).ok());
  return out;
}

WriteOptions NoSync() {
  WriteOptions o;
  o.fsync = false;
  return o;
}

TEST_CASE("A one-tensor file is byte for byte what the reference writer produces") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/a.safetensors";
  const std::vector<float> values = {1.0f, 2.0f};
  auto written = WriteSafetensors(path, {Tensor("a", "F32", {2}, values)}, {});
  REQUIRE(written.ok());
  // 54 bytes of JSON, padded with 2 spaces to 56 so that the data starts 8-byte aligned.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(header.size() == 54);
  std::string data(8, '\0');
  std::memcpy(data.data(), values.data(), 8);
  const std::string expected = LittleEndian64(56) + header + "  " + data;
  CHECK(ReadBytes(path) == expected);
  CHECK(written->bytes == 72);
  CHECK(written->crc32c == Crc32c(expected));

  // Metadata comes first, as in files written by Python's safetensors.
  auto with_metadata = WriteSafetensors(path, {Tensor("a", "F32", {2}, values)}, {{"format", "pt"}}, NoSync());
  REQUIRE(with_metadata.ok());
  const std::string header2 = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(ReadBytes(path) == LittleEndian64(88) + header2 + std::string(88 - header2.size(), ' ') + data);
}

TEST_CASE("Tensors of several dtypes, a 0-d and empty tensors, and metadata round-trip") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 3.25f, -0.0f, 1e30f};
  const std::vector<uint16_t> bf16 = {0x3f80, 0x4000, 0xbf80, 0x7f80};
  const std::vector<uint16_t> scalar = {0x3c00};  // F16 1.0, 0-d
  const std::vector<int64_t> step = {-1, 1234567890123, 7};
  const std::vector<uint8_t> empty;
  const std::vector<float> empty2;
  const std::vector<std::string> order = {"w", "b16", "scale", "step", "nothing", "zero_rows"};
  auto written = WriteSafetensors(path,
                                  {Tensor("w", "F32", {2, 3}, w), Tensor("b16", "BF16", {4}, bf16),
                                   Tensor("scale", "F16", {}, scalar), Tensor("step", "I64", {3}, step),
                                   Tensor("nothing", "U8", {0}, empty), Tensor("zero_rows", "F32", {0, 5}, empty2)},
                                  {{"step", "100"}, {"format", "pt"}}, NoSync());
  REQUIRE(written.ok());

  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK(file->metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"step", "100"}});
  CHECK(file->data_start() % 8 == 0);
  CHECK(file->file_size() == written->bytes);
  REQUIRE(file->tensors().size() == order.size());
  for (size_t i = 0; i < order.size(); ++i) CHECK(file->tensors()[i].name == order[i]);  // written order

  const SafetensorsTensor* t = file->Find("w");
  REQUIRE(t != nullptr);
  CHECK(t->dtype == "F32");
  CHECK(t->shape == std::vector<int64_t>{2, 3});
  CHECK(t->begin == 0);
  CHECK(t->end == 24);
  CHECK(ReadAll<float>(*file, *t) == w);
  CHECK(ReadAll<uint16_t>(*file, *file->Find("b16")) == bf16);
  const SafetensorsTensor* s = file->Find("scale");
  REQUIRE(s != nullptr);
  CHECK(s->shape.empty());
  CHECK(ReadAll<uint16_t>(*file, *s) == scalar);
  CHECK(ReadAll<int64_t>(*file, *file->Find("step")) == step);
  CHECK(file->Find("nothing")->bytes() == 0);
  CHECK(file->Find("zero_rows")->shape == std::vector<int64_t>{0, 5});
  CHECK(file->Find("missing") == nullptr);

  SafetensorsFile moved = std::move(*file);  // the descriptor travels with the object
  CHECK(ReadAll<int64_t>(moved, *moved.Find("step")) == step);
}

TEST_CASE("Read returns a sub-range of a tensor and refuses one outside it") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/x.safetensors";
  std::vector<int32_t> a(10), b(100);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 1000);
  REQUIRE(WriteSafetensors(path, {Tensor("a", "I32", {10}, a), Tensor("b", "I32", {10, 10}, b)}, {}, NoSync()).ok());
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  const SafetensorsTensor& tb = *file->Find("b");
  std::vector<int32_t> part(5);
  REQUIRE(file->Read(tb, 37 * 4, part.data(), 5 * 4).ok());
  CHECK(part == std::vector<int32_t>{1037, 1038, 1039, 1040, 1041});
  CHECK(file->Read(tb, 400, part.data(), 0).ok());

  Status past = file->Read(tb, 396, part.data(), 8);
  CHECK(past.code() == StatusCode::kInvalidArgument);
  CHECK(past.message().find(path) == 0);
  CHECK(past.message().find("tensor 'b'") != std::string::npos);
  CHECK(file->Read(tb, 401, part.data(), 0).code() == StatusCode::kInvalidArgument);
  CHECK(file->Read(tb, ~uint64_t{0}, part.data(), 2).code() == StatusCode::kInvalidArgument);

  // A file cut short after Open: the read fails as data loss, not with garbage.
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(file->data_start() + 60)) == 0);
  Status cut = file->Read(tb, 0, b.data(), 400);
  CHECK(cut.code() == StatusCode::kDataLoss);
  CHECK(cut.message().find(path) == 0);
}

TEST_CASE("The CRC-32C of the write is the CRC-32C of the file, also past the gather buffer") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/big.safetensors";
  // Small tensors (gathered), a 9 MiB one (written directly, in two calls), small ones again.
  std::vector<float> big((9u << 20) / 4);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 9973);
  std::vector<uint8_t> small(1000, 7);
  std::vector<uint16_t> medium(300000, 0xabcd);
  WriteOptions atomic;
  atomic.atomic = true;
  auto written = WriteSafetensors(path,
                                  {Tensor("s1", "U8", {1000}, small), Tensor("big", "F32", {int64_t(big.size())}, big),
                                   Tensor("m", "F16", {300000}, medium), Tensor("s2", "U8", {10, 100}, small)},
                                  {{"k", "v"}}, atomic);
  REQUIRE(written.ok());
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  const std::string bytes = ReadBytes(path);
  CHECK(written->bytes == bytes.size());
  CHECK(written->crc32c == Crc32c(bytes));
  auto crc = SafetensorsFile::FileCrc32c(path);
  REQUIRE(crc.ok());
  CHECK(*crc == written->crc32c);

  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK(ReadAll<float>(*file, *file->Find("big")) == big);
  CHECK(ReadAll<uint16_t>(*file, *file->Find("m")) == medium);
  CHECK(ReadAll<uint8_t>(*file, *file->Find("s2")) == small);

  CHECK(SafetensorsFile::FileCrc32c(dir.path() + "/nope").status().code() == StatusCode::kNotFound);
}

TEST_CASE("A tensor streamed from a source in pieces writes the bytes of the same tensor given whole") {
  testing::TempDir dir;
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f;
  std::vector<uint8_t> small(10, 1);
  auto streamed = [&](size_t piece) {
    TensorData t = Tensor("v", "F32", {int64_t(values.size())}, values);
    t.data = nullptr;
    t.source = [&values, piece](const TensorAppend& append) -> Status {
      for (size_t at = 0; at < values.size(); at += piece) {
        DSLAUNCH_RETURN_IF_ERROR(append(values.data() + at, std::min(piece, values.size() - at) * sizeof(float)));
      }
      return Status::Ok();
    };
    return t;
  };
  REQUIRE(WriteSafetensors(dir.path() + "/whole.safetensors",
                           {Tensor("s", "U8", {10}, small), Tensor("v", "F32", {int64_t(values.size())}, values)},
                           {{"k", "v"}}, NoSync())
              .ok());
  for (size_t piece : {size_t{1}, size_t{700}, values.size()}) {
    CAPTURE(piece);
    const std::string path = dir.path() + "/streamed.safetensors";
    auto written = WriteSafetensors(path, {Tensor("s", "U8", {10}, small), streamed(piece)}, {{"k", "v"}}, NoSync());
    REQUIRE(written.ok());
    CHECK(ReadBytes(path) == ReadBytes(dir.path() + "/whole.safetensors"));
    CHECK(written->crc32c == Crc32c(ReadBytes(path)));
  }
  // A source that gives too few bytes, or fails, is an error and leaves no file.
  TensorData short_source = streamed(700);
  short_source.source = [&values](const TensorAppend& append) { return append(values.data(), 400); };
  auto r = WriteSafetensors(dir.path() + "/short.safetensors", {short_source}, {}, NoSync());
  CHECK(r.status().code() == StatusCode::kInternal);
  CHECK(r.status().message().find("400 of 40000 bytes") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/short.safetensors"));
  TensorData failing = streamed(700);
  failing.source = [](const TensorAppend&) { return DataLossError("swap file: read failed"); };
  r = WriteSafetensors(dir.path() + "/failing.safetensors", {failing}, {}, NoSync());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/failing.safetensors"));
}

TEST_CASE("A file as Python's safetensors writes it reads: keys out of data order, unpadded or padded") {
  // save_file({"a": torch.tensor([1., 2.]), "b": torch.tensor([3])}, metadata={"format": "pt"})
  // orders the data by dtype alignment (I64 before F32); the header lists keys in any order.
  std::string data(16, '\0');
  const int64_t three = 3;
  const float ab[2] = {1.0f, 2.0f};
  std::memcpy(data.data(), &three, 8);
  std::memcpy(data.data() + 8, ab, 8);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  testing::TempDir dir;
  for (const std::string& padding : {std::string(), std::string(7, ' '), std::string("\n\t ")}) {
    CAPTURE(padding.size());
    const std::string path = dir.path() + "/py.safetensors";
    WriteBytes(path, RawFile(header + padding, data));
    auto file = SafetensorsFile::Open(path);
    REQUIRE(file.ok());
    REQUIRE(file->tensors().size() == 2);
    CHECK(file->tensors()[0].name == "b");  // data order
    CHECK(file->metadata().at("format") == "pt");
    CHECK(ReadAll<float>(*file, *file->Find("a")) == std::vector<float>{1.0f, 2.0f});
    CHECK(ReadAll<int64_t>(*file, *file->Find("b")) == std::vector<int64_t>{3});
  }
  // An empty file: no tensors, no data.
  const std::string path = dir.path() + "/empty.safetensors";
  WriteBytes(path, RawFile("{}      ", ""));
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK(file->tensors().empty());
  auto written = WriteSafetensors(path, {}, {}, NoSync());
  REQUIRE(written.ok());
  CHECK(ReadBytes(path) == RawFile("{}      ", ""));
}

TEST_CASE("Open rejects a corrupt or truncated file as data loss naming the file and the fault") {
  const std::string a8 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\x01');
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;  // a part of the expected message
  };
  const std::vector<Case> cases = {
      {"shorter than the length", "abc", "too short for the 8-byte header length"},
      {"header past the end", LittleEndian64(100) + "{}", "header length 100 runs past the end of the file"},
      {"header above 100 MB", LittleEndian64(100'000'001) + "{}", "above the limit of 100000000"},
      {"not an object", RawFile(R"(["a"])", ""), "does not start with '{'"},
      {"leading space", RawFile(R"( {})", ""), "does not start with '{'"},
      {"bad JSON", RawFile(R"({"a":)", ""), "not valid JSON"},
      {"trailing garbage", RawFile(std::string("{}\0\0", 4), ""), "not valid JSON"},
      {"invalid UTF-8", RawFile("{\"\xff\":1}", ""), "not valid JSON"},
      {"duplicate tensor", RawFile("{" + a8 + "," + a8 + "}", data8), "key 'a' twice"},
      {"duplicate field", RawFile(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8),
       "key 'dtype' twice"},
      {"metadata not an object", RawFile(R"({"__metadata__":[]})", ""), "__metadata__ is array, not an object"},
      {"metadata value not a string", RawFile(R"({"__metadata__":{"step":3}})", ""), "__metadata__['step'] is 3"},
      {"entry not an object", RawFile(R"({"a":[1]})", ""), "tensor 'a': entry is array"},
      {"missing dtype", RawFile(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data8), "missing field 'dtype'"},
      {"missing shape", RawFile(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", data8), "missing field 'shape'"},
      {"missing offsets", RawFile(R"({"a":{"dtype":"F32","shape":[2]}})", data8), "missing field 'data_offsets'"},
      {"unknown field", RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
       "unknown field 'x'"},
      {"dtype not a string", RawFile(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data8),
       "dtype is 4, not a string"},
      {"unknown dtype", RawFile(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", data8),
       "unknown dtype 'F33'"},
      {"shape not an array", RawFile(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data8),
       "shape is 2, not an array"},
      {"negative dimension", RawFile(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
       "shape[0] is -2, not a non-negative integer"},
      {"fractional dimension", RawFile(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", data8),
       "shape[0] is 2.0"},
      {"three offsets", RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", data8),
       "not an array [begin, end]"},
      {"negative offset", RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,8]}})", data8),
       "data_offsets[0] is -8"},
      {"end before begin", RawFile(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8),
       "end before they begin"},
      {"shape and offsets disagree", RawFile(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
       "needs 12 bytes but data_offsets [0, 8) hold 8"},
      {"overflowing shape",
       RawFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data8),
       "is too large"},
      {"truncated data", RawFile("{" + a8 + "}", "abc"), "run past the end of the data section (3 bytes"},
      {"overlap",
       RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
               data8),
       "tensor 'b' data_offsets [4, 8) overlap tensor 'a' [0, 8)"},
      {"gap", RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8),
       "bytes [0, 4) of the data section belong to no tensor"},
      {"trailing data", RawFile("{" + a8 + "}", data8 + "xyz"),
       "bytes [8, 11) at the end of the data section belong to no tensor"},
  };
  testing::TempDir dir;
  const std::string path = dir.path() + "/bad.safetensors";
  for (const Case& c : cases) {
    CAPTURE(c.name);
    WriteBytes(path, c.bytes);
    auto file = SafetensorsFile::Open(path);
    REQUIRE_FALSE(file.ok());
    CAPTURE(file.status().message());
    CHECK(file.status().code() == StatusCode::kDataLoss);
    CHECK(file.status().message().find(path) == 0);
    CHECK(file.status().message().find(c.message) != std::string::npos);
  }

  auto missing = SafetensorsFile::Open(dir.path() + "/missing.safetensors");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find(dir.path() + "/missing.safetensors") != std::string::npos);

  // A good file cut anywhere is data loss.
  const std::vector<float> values(16, 1.5f);
  const std::string good = dir.path() + "/good.safetensors";
  REQUIRE(WriteSafetensors(good, {Tensor("v", "F32", {16}, values)}, {{"a", "b"}}, NoSync()).ok());
  const std::string bytes = ReadBytes(good);
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8}, size_t{40}, bytes.size() - 64, bytes.size() - 1}) {
    CAPTURE(cut);
    WriteBytes(path, bytes.substr(0, cut));
    CHECK(SafetensorsFile::Open(path).status().code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("WriteSafetensors rejects inconsistent tensors before touching the file") {
  const std::vector<float> two = {1, 2};
  struct Case {
    std::string name;
    std::vector<TensorData> tensors;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty name", {Tensor("", "F32", {2}, two)}, "empty name"},
      {"duplicate", {Tensor("a", "F32", {2}, two), Tensor("a", "F32", {2}, two)}, "tensor 1 'a': duplicate name"},
      {"reserved name", {Tensor("__metadata__", "F32", {2}, two)}, "reserved"},
      {"unknown dtype", {Tensor("a", "float32", {2}, two)}, "unknown dtype 'float32'"},
      {"negative dimension", {Tensor("a", "F32", {-2}, two)}, "invalid shape [-2]"},
      {"size mismatch", {Tensor("a", "F32", {3}, two)}, "shape [3] of F32 is 12 bytes but 8 bytes were given"},
      {"16-bit view of floats", {Tensor("a", "BF16", {2}, two)}, "is 4 bytes but 8 bytes"},
      {"invalid UTF-8", {Tensor("a\xff", "F32", {2}, two)}, "not valid UTF-8"},
  };
  testing::TempDir dir;
  const std::string path = dir.path() + "/out.safetensors";
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto r = WriteSafetensors(path, c.tensors, {}, NoSync());
    REQUIRE_FALSE(r.ok());
    CAPTURE(r.status().message());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(path) == 0);
    CHECK(r.status().message().find(c.message) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(path));
  }
  auto bad_dir = WriteSafetensors(dir.path() + "/no/such/dir/x.safetensors", {Tensor("a", "F32", {2}, two)}, {});
  CHECK_FALSE(bad_dir.ok());
  CHECK(bad_dir.status().message().find("no/such/dir/x.safetensors") != std::string::npos);
}

TEST_CASE("An atomic write replaces the old file only when complete") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const std::vector<float> one = {1, 2}, two = {3, 4, 5};
  WriteOptions atomic;
  atomic.atomic = true;
  REQUIRE(WriteSafetensors(path, {Tensor("x", "F32", {2}, one)}, {}, atomic).ok());
  const std::string before = ReadBytes(path);
  // A failing write (invalid tensor) leaves the old file as it was.
  CHECK_FALSE(WriteSafetensors(path, {Tensor("x", "F32", {4}, two)}, {}, atomic).ok());
  CHECK(ReadBytes(path) == before);
  REQUIRE(WriteSafetensors(path, {Tensor("x", "F32", {3}, two)}, {}, atomic).ok());
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK(ReadAll<float>(*file, *file->Find("x")) == two);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("Runtime dtypes map to their safetensors names") {
  CHECK(SafetensorsDTypeName(DType::kFloat32) == "F32");
  CHECK(SafetensorsDTypeName(DType::kFloat16) == "F16");
  CHECK(SafetensorsDTypeName(DType::kBFloat16) == "BF16");
  CHECK(SafetensorsDTypeSize("F32") == 4u);
  CHECK(SafetensorsDTypeSize("BF16") == 2u);
  CHECK(SafetensorsDTypeSize("I64") == 8u);
  CHECK(SafetensorsDTypeSize("U8") == 1u);
  CHECK_FALSE(SafetensorsDTypeSize("f32").has_value());
}

}  // namespace
}  // namespace dslaunch::runtime
