// Specifications for lnorm::io .npy reading and writing: numpy-exact headers, strict validation with
// one-line messages that name the file, and atomic output (no partial or temporary files left behind).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lnorm/npy.hpp"

namespace fs = std::filesystem;
using lnorm::io::NpyError;
using lnorm::io::NpyReader;
using lnorm::io::NpyWriter;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A fresh directory per test, removed at the end even when the test fails.
struct TempDir {
  fs::path dir;
  TempDir() {
    std::random_device rd;
    dir = fs::temp_directory_path() /
          ("lnorm_npy_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A .npy file built by hand: magic, version, little-endian header length, dict text (padded to 64 bytes
// with spaces and '\n' when `pad`), then raw data.
std::string craft(const std::string& dict, const std::string& data = "", int major = 1, bool pad = true) {
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  if (pad) {
    while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
  }
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string f4_bytes(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

// The NpyError message thrown by `f`, or a marker that fails every phrase check.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const NpyError& e) {
    return e.what();
  }
  return "<no NpyError thrown>";
}

std::string open_error(const std::string& path) {
  return error_of([&] { NpyReader reader(path); });
}

void check_message(const std::string& msg, const std::string& path, const std::string& phrase) {
  INFO("message: " << msg);
  CHECK_THAT(msg, StartsWith(path + ": ") && Contains(phrase));
  CHECK(msg.find('\n') == std::string::npos);  // one line, so the CLI can print it as is
}

const std::string kF4Dict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

}  // namespace

TEST_CASE("npy: every supported descr round-trips for empty, 0-d, 1-d, 2-d and zero-size shapes", "[npy]") {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::size_t>> descrs = {{"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"<u2", 2}};
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {2, 0, 3}};
  for (const auto& [descr, item] : descrs) {
    for (const auto& shape : shapes) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      std::vector<unsigned char> data(static_cast<std::size_t>(n) * item);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + item);
      const std::string path = tmp.file("rt" + descr.substr(1) + "_" + std::to_string(shape.size()) + ".npy");
      INFO(descr << " rank " << shape.size() << " elements " << n);

      lnorm::io::save(path, descr, shape, data.data());
      NpyReader reader(path);
      CHECK(reader.path() == path);
      CHECK(reader.header().descr == descr);
      CHECK(reader.header().shape == shape);
      CHECK(reader.header().item_size == item);
      CHECK(reader.header().elements == n);
      CHECK(reader.header().data_offset % 64 == 0);  // numpy aligns data for mmap
      const auto back = lnorm::io::read_all(reader);
      REQUIRE(back.size() == data.size());
      CHECK(std::equal(data.begin(), data.end(), back.begin(),
                       [](unsigned char d, std::byte b) { return std::byte{d} == b; }));
    }
  }
}

TEST_CASE("npy: the written header is byte-for-byte numpy's for '<f4' (2, 3)", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("x.npy");
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};
  lnorm::io::save(path, "<f4", {2, 3}, data.data());

  // 6 magic + 2 version + 2 length (0x76 = 118) + 59 dict chars + 58 spaces + '\n' = 128.
  // numpy writes 21 - len("2") = 20 spare spaces for growth; aligning to 64 adds 38 more.
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += kF4Dict23;
  expected += std::string(58, ' ') + "\n";
  REQUIRE(expected.size() == 128);

  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() == 128 + 24);
  CHECK(bytes.substr(0, 128) == expected);
  CHECK(bytes.substr(128) == f4_bytes({1, 2, 3, 4, 5, 6}));
}

TEST_CASE("npy: 1-element shapes are written as Python tuples '(5,)', 0-d as '()'", "[npy]") {
  TempDir tmp;
  const std::vector<double> data(5, 0.5);
  lnorm::io::save(tmp.file("a.npy"), "<f8", {5}, data.data());
  lnorm::io::save(tmp.file("b.npy"), "<f8", {}, data.data());
  CHECK_THAT(read_file(tmp.file("a.npy")), Contains("'shape': (5,), }"));
  // 0-d: no spare growth space (there is no first axis); 10 + 55 + 62 spaces + '\n' = 128.
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') + "\n";
  CHECK(read_file(tmp.file("b.npy")).substr(0, 128) == expected);
}

TEST_CASE("npy: header padding follows numpy's growth space and full-64 quirk", "[npy]") {
  // numpy (format.py, _write_array_header/_wrap_header) appends 21 - len(str(shape[0])) spaces, then pads
  // with 64 - (10 + len + 1) % 64 spaces: a full 64 when already aligned. For this shape the dict is
  // 97 chars + 20 growth = 117, 10 + 118 = 128 is aligned, so 64 more spaces follow: 192 bytes in all.
  TempDir tmp;
  const std::string path = tmp.file("pad.npy");
  lnorm::io::save(path, "<f4", {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100000}, nullptr);
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() == 192);
  CHECK(bytes.substr(8, 2) == std::string("\xB6\x00", 2));  // 182 = 192 - 10
  CHECK(bytes.substr(10, 97) ==
        "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100000), }");
  CHECK(bytes.substr(107, 84) == std::string(84, ' '));
  CHECK(bytes.back() == '\n');
}

TEST_CASE("npy: '=' (native order) is accepted as little-endian and normalized to '<'", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("eq.npy");
  write_file(path, craft("{'descr': '=f4', 'fortran_order': False, 'shape': (1,), }", f4_bytes({2.5f})));
  NpyReader reader(path);
  CHECK(reader.header().descr == "<f4");
  float v = 0;
  reader.read(0, 1, &v);
  CHECK(v == 2.5f);
}

TEST_CASE("npy: hand-written version 2.0 and 3.0 files are read", "[npy]") {
  TempDir tmp;
  for (int major : {2, 3}) {
    const std::string path = tmp.file(std::to_string(major) + "_v.npy");
    write_file(path, craft(kF4Dict23, f4_bytes({1, 2, 3, 4, 5, 6}), major));
    NpyReader reader(path);
    CHECK(reader.header().shape == std::vector<std::int64_t>{2, 3});
    CHECK(reader.header().data_offset == 128);
    std::vector<float> v(6);
    reader.read(0, 6, v.data());
    CHECK(v == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
}

TEST_CASE("npy: the header dict is parsed as Python, not pattern-matched", "[npy]") {
  TempDir tmp;
  const std::vector<std::string> dicts = {
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",  // double quotes, no trailing comma
      "{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}",         // reordered keys
      "{ 'fortran_order' :False,'shape':(2,3,),'descr':'<f4' , }",         // odd spacing, trailing commas
      "{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2, 3)}",     // newlines inside the braces
  };
  for (std::size_t i = 0; i < dicts.size(); ++i) {
    INFO(dicts[i]);
    const std::string path = tmp.file(std::to_string(i) + "_dict.npy");
    write_file(path, craft(dicts[i], f4_bytes({1, 2, 3, 4, 5, 6})));
    NpyReader reader(path);
    CHECK(reader.header().descr == "<f4");
    CHECK(reader.header().shape == std::vector<std::int64_t>{2, 3});
  }
  // Unpadded header without the final newline: numpy never writes it, but it is a valid dict.
  const std::string path = tmp.file("nopad.npy");
  write_file(path, craft(kF4Dict23, f4_bytes({1, 2, 3, 4, 5, 6}), 1, false));
  CHECK(NpyReader(path).header().data_offset == 10 + kF4Dict23.size());
}

TEST_CASE("npy: every malformed or unsupported file is rejected with its path and the reason", "[npy]") {
  TempDir tmp;
  const std::string data6 = f4_bytes({1, 2, 3, 4, 5, 6});
  auto header_with = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  };
  std::string v2_absurd("\x93NUMPY\x02\x00", 8);
  v2_absurd += std::string("\x01\x00\x10\x00", 4) + "{}";  // 0x100001 = 1 MiB + 1
  std::string v1_short = craft(kF4Dict23, data6).substr(0, 50);

  struct Case { std::string name, bytes, phrase; };
  const std::vector<Case> cases = {
      {"empty", "", "not a .npy file"},
      {"magic", std::string("\x93NUMPX\x01\x00", 8) + craft(kF4Dict23).substr(8), "not a .npy file (bad magic)"},
      {"csv", "1,2,3\n4,5,6\n", "not a .npy file (bad magic)"},
      {"version", std::string("\x93NUMPY\x04\x00\x10\x00", 10), "unknown .npy format version 4.0"},
      {"no_len", std::string("\x93NUMPY\x01\x00", 8), "truncated header"},
      {"short_header", v1_short, "truncated header"},
      {"absurd", v2_absurd, "header length 1048577 is absurd"},
      {"unclosed", craft("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", data6), "malformed header"},
      {"no_colon", craft("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}", data6), "malformed header"},
      {"junk_after", craft(kF4Dict23 + " junk", data6), "malformed header"},
      {"not_dict", craft("['descr', '<f4']", data6), "malformed header"},
      {"name", craft(header_with("'<f4'", "false", "(2, 3)"), data6), "malformed header"},
      {"nesting", craft("{'descr': " + std::string(5000, '(') + "}", data6), "nested too deeply"},
      {"missing", craft("{'descr': '<f4', 'fortran_order': False}", data6), "missing the key 'shape'"},
      {"extra", craft("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data6),
       "unexpected key 'x'"},
      {"duplicate", craft("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data6),
       "duplicate key 'descr'"},
      {"fortran_int", craft(header_with("'<f4'", "0", "(2, 3)"), data6), "fortran_order must be True or False"},
      {"negative", craft(header_with("'<f4'", "False", "(-2, -3)"), data6), "negative dimension -2"},
      {"float_dim", craft(header_with("'<f4'", "False", "(2.5, 3)"), data6), "non-integer dimension 2.5"},
      {"str_dim", craft(header_with("'<f4'", "False", "('2', 3)"), data6), "non-integer dimension '2'"},
      {"not_tuple", craft(header_with("'<f4'", "False", "(6)"), data6), "shape must be a tuple"},
      {"list_shape", craft(header_with("'<f4'", "False", "[2, 3]"), data6), "shape must be a tuple"},
      {"huge_dim", craft(header_with("'<f4'", "False", "(99999999999999999999,)"), data6), "does not fit in int64"},
      {"count_overflow", craft(header_with("'<f4'", "False", "(4294967296, 4294967296)"), data6),
       "too many elements (overflows int64)"},
      {"bytes_overflow", craft(header_with("'<f4'", "False", "(4611686018427387904,)"), data6),
       "byte size overflows int64"},
      {"i4", craft(header_with("'<i4'", "False", "(6,)"), data6),
       "unsupported dtype '<i4'; supported: '<f4' (f32), '<f8' (f64), '<f2' (f16), '<u2' (bf16 bit patterns), '|u1'"},
      {"bar_u2", craft(header_with("'|u2'", "False", "(12,)"), data6), "unsupported dtype '|u2'"},
      {"structured", craft(header_with("[('a', '<f4')]", "False", "(6,)"), data6), "unsupported dtype"},
      {"big_endian", craft(header_with("'>f4'", "False", "(6,)"), data6),
       "big-endian dtype '>f4' is not supported; convert with x.astype('<f4')"},
      {"big_endian_f8", craft(header_with("'>f8'", "False", "(3,)"), data6), "x.astype('<f8')"},
      {"truncated", craft(kF4Dict23, data6.substr(0, 20)),
       "file is truncated: header promises 6 elements (24 bytes) but the file has 20 bytes of data"},
      {"trailing", craft(kF4Dict23, data6 + "xyz"), "trailing bytes after the data"},
  };
  for (const Case& c : cases) {
    const std::string path = tmp.file(c.name + ".npy");
    write_file(path, c.bytes);
    INFO("case " << c.name);
    check_message(open_error(path), path, c.phrase);
    // The in-memory parser (the fuzz target's entry) runs the same checks and says the same thing.
    CHECK(error_of([&] { lnorm::io::parse_npy(c.bytes, path); }) == open_error(path));
  }
  check_message(open_error(tmp.file("absent.npy")), tmp.file("absent.npy"), "cannot open: No such file");
  check_message(open_error(tmp.dir.string()), tmp.dir.string(), "not a regular file");
}

TEST_CASE("npy: parse_npy reads the header NpyReader reads from the same bytes", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("a.npy");
  const std::string data6 = f4_bytes({1, 2, 3, 4, 5, 6});
  write_file(path, craft(kF4Dict23, data6));
  NpyReader r(path);
  const lnorm::io::NpyHeader h = lnorm::io::parse_npy(read_file(path), "a.npy");
  CHECK(h.descr == r.header().descr);
  CHECK(h.shape == r.header().shape);
  CHECK(h.elements == 6);
  CHECK(h.item_size == 4);
  CHECK(h.data_offset == r.header().data_offset);
  CHECK(read_file(path).substr(h.data_offset) == data6);
}

TEST_CASE("npy: a header claiming 10^12 elements fails fast with sizes, without allocating", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("huge.npy");
  write_file(path, craft("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }",
                         std::string(128, '\0')));
  // An attempt to allocate 4 TB would surface as std::bad_alloc, not as this NpyError.
  check_message(open_error(path), path,
                "file is truncated: header promises 1000000000000 elements (4000000000000 bytes) "
                "but the file has 128 bytes of data");
}

TEST_CASE("npy: read(first, count) returns exactly that element range", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("r.npy");
  std::vector<double> data(10);
  for (int i = 0; i < 10; ++i) data[static_cast<std::size_t>(i)] = i * 1.5;
  lnorm::io::save(path, "<f8", {10}, data.data());

  NpyReader reader(path);
  std::vector<double> part(4, -1);
  reader.read(3, 4, part.data());
  CHECK(part == std::vector<double>{4.5, 6.0, 7.5, 9.0});
  reader.read(9, 1, part.data());  // the last element
  CHECK(part[0] == 13.5);
  reader.read(0, 1, part.data());  // seeking back to the start
  CHECK(part[0] == 0.0);
  reader.read(10, 0, nullptr);     // an empty range at the end is fine
  check_message(error_of([&] { reader.read(8, 3, part.data()); }), path, "cannot read 3 elements from element 8");
  check_message(error_of([&] { reader.read(-1, 1, part.data()); }), path, "the array has 10 elements");
}

TEST_CASE("npy: a Fortran-order file (np.save of a transposed array) reads in C order", "[npy]") {
  TempDir tmp;
  // The 2x3 array [[0, 1, 2], [3, 4, 5]] stored column-major: 0 3 1 4 2 5.
  const std::string path = tmp.file("f.npy");
  write_file(path, craft("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4_bytes({0, 3, 1, 4, 2, 5})));
  NpyReader reader(path);
  CHECK(reader.header().fortran_order);
  std::vector<float> all(6, -1);
  reader.read(0, 6, all.data());
  CHECK(all == std::vector<float>{0, 1, 2, 3, 4, 5});
  std::vector<float> row(3, -1);
  reader.read(3, 3, row.data());  // the second row alone, as check streams rows
  CHECK(row == std::vector<float>{3, 4, 5});

  // 3-d: element (i, j, k) of a 2x3x4 array holds 100i + 10j + k; column-major puts i fastest.
  std::vector<float> f;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) f.push_back(static_cast<float>(100 * i + 10 * j + k));
  std::string bytes(f.size() * 4, '\0');
  std::memcpy(bytes.data(), f.data(), bytes.size());
  const std::string path3 = tmp.file("f3.npy");
  write_file(path3, craft("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }", bytes));
  NpyReader r3(path3);
  std::vector<float> c(24);
  r3.read(0, 24, c.data());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(c[static_cast<std::size_t>(12 * i + 4 * j + k)] == static_cast<float>(100 * i + 10 * j + k));

  // One long dimension (1-d, or 1xN): the orders are the same bytes, streamed from the file.
  const std::string path1 = tmp.file("f1.npy");
  write_file(path1, craft("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 3), }", f4_bytes({7, 8, 9})));
  NpyReader r1(path1);
  std::vector<float> one(3);
  r1.read(0, 3, one.data());
  CHECK(one == std::vector<float>{7, 8, 9});
}

TEST_CASE("npy: NpyWriter streams chunks and only publishes the file on commit", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("w.npy");
  write_file(path, "old contents");
  {
    NpyWriter writer(path, "<f4", {2, 3});
    CHECK(tmp.entries() == 2);  // the old file and one temporary file next to it
    const std::string data = f4_bytes({1, 2, 3, 4, 5, 6});
    writer.write(data.data(), 8);
    writer.write(data.data() + 8, 0);
    writer.write(data.data() + 8, 16);
    CHECK(read_file(path) == "old contents");  // readers never see a half-written file
    writer.commit();
  }
  CHECK(tmp.entries() == 1);  // no temporary file left
  NpyReader reader(path);
  std::vector<float> v(6);
  reader.read(0, 6, v.data());
  CHECK(v == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("npy: an NpyWriter destroyed without commit leaves neither the file nor a temporary", "[npy]") {
  TempDir tmp;
  {
    NpyWriter writer(tmp.file("w.npy"), "<f8", {3});
    const double x[3] = {1, 2, 3};
    writer.write(x, sizeof x);  // complete, but never committed: e.g. a later step failed
  }
  CHECK(tmp.entries() == 0);
}

TEST_CASE("npy: commit with too few bytes, or writing too many, throws and leaves nothing", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("w.npy");
  const float x[7] = {};
  {
    NpyWriter writer(path, "<f4", {2, 3});
    writer.write(x, 20);
    check_message(error_of([&] { writer.commit(); }), path, "only 20 of 24 data bytes were written");
    CHECK(tmp.entries() == 0);
    check_message(error_of([&] { writer.write(x, 4); }), path, "earlier error");
  }
  {
    NpyWriter writer(path, "<f4", {2, 3});
    check_message(error_of([&] { writer.write(x, 28); }), path, "would exceed the 24 bytes");
    CHECK(tmp.entries() == 0);
  }
  CHECK(tmp.entries() == 0);
}

TEST_CASE("npy: a moved NpyWriter keeps ownership of its temporary file", "[npy]") {
  TempDir tmp;
  const std::string path = tmp.file("m.npy");
  NpyWriter first(path, "<f4", {1});
  NpyWriter second(std::move(first));
  const float x = 3.0f;
  second.write(&x, 4);
  second.commit();
  CHECK(tmp.entries() == 1);
  CHECK(NpyReader(path).header().elements == 1);
}

TEST_CASE("npy: writing into a missing directory or with a bad descr or shape is refused", "[npy]") {
  TempDir tmp;
  const std::string missing = (tmp.dir / "no_such_dir" / "y.npy").string();
  CHECK(error_of([&] { NpyWriter w(missing, "<f4", {2}); }) ==
        missing + ": cannot create output file: No such file or directory");
  const std::string path = tmp.file("y.npy");
  check_message(error_of([&] { NpyWriter w(path, "<i4", {2}); }), path, "unsupported dtype '<i4'");
  check_message(error_of([&] { NpyWriter w(path, ">f4", {2}); }), path, "big-endian dtype '>f4'");
  check_message(error_of([&] { NpyWriter w(path, "<f4", {2, -1}); }), path, "negative dimension -1");
  check_message(error_of([&] { lnorm::io::save(path, "<f4", {2}, nullptr); }), path, "no data");
  CHECK(tmp.entries() == 0);
}
