// The list of bad inputs, each driven through the real `lnorm` executable: every one must give
// exit 2, exactly one line "lnorm: ..." naming the file or flag and what is wrong, and no output
// file (cli_support.hpp's expect_refused). The .npy files are built byte by byte here, so a test
// can say exactly which part of the format is broken.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace {

using namespace lnorm::testing;

// A .npy version 1.0 file: magic, version, little-endian header length, the header dict padded with
// spaces to a 64-byte boundary and '\n' (numpy's layout), then the raw data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, std::string magic = "\x93NUMPY") {
  std::string header = dict;
  const std::size_t unpadded = magic.size() + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = magic;
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string dict(const std::string& descr, const std::string& shape, const char* fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

// n f32 values 0, 1, 2, ... as little-endian bytes.
std::string f32_data(std::size_t n) {
  std::string out(n * 4, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 7);
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The directory every case writes into: a good 4x8 f32 x, gamma/beta files, and the outputs' names.
struct Case {
  TempDir t;
  std::string x = t / "x.npy", y = t / "y.npy";
  std::string outs = " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") + " --rstd " + (t / "r.npy");
  Case() { write_file(x, npy_bytes(dict("<f4", "(4, 8)"), f32_data(32))); }
  // `reference` and `run --kernel welford` on x-file `path`: both must refuse it naming the file.
  void refuse_x(const std::string& name, const std::string& bytes, const std::string& problem) {
    const std::string path = t / name;
    write_file(path, bytes);
    for (const std::string& cmd : std::vector<std::string>{"reference", "run --kernel welford"}) {
      expect_refused(t, cmd + " --x " + path + outs, path);
      expect_refused(t, cmd + " --x " + path + outs, problem);
    }
  }
};

const std::string kGood = npy_bytes(dict("<f4", "(4, 8)"), f32_data(32));

}  // namespace

TEST_CASE("bad .npy: bad magic, empty and garbage files are 'not a .npy file'", "[cli][bad_input]") {
  Case c;
  c.refuse_x("magic.npy", npy_bytes(dict("<f4", "(4, 8)"), f32_data(32), "\x93NUMPX"), "not a .npy file (bad magic)");
  c.refuse_x("empty.npy", "", "not a .npy file (it is empty)");
  c.refuse_x("garbage.npy", "\x01\xff garbage that is not a numpy file\n\x7f", "not a .npy file (bad magic)");
  c.refuse_x("text.npy", "x,y\n1,2\n", "not a .npy file");
}

TEST_CASE("bad .npy: truncated prefix, header and data are each named as truncated", "[cli][bad_input]") {
  Case c;
  c.refuse_x("prefix.npy", kGood.substr(0, 9), "truncated header");
  c.refuse_x("header.npy", kGood.substr(0, 40), "truncated header");
  c.refuse_x("data.npy", kGood.substr(0, kGood.size() - 5), "file is truncated");
  c.refuse_x("nodata.npy", kGood.substr(0, kGood.size() - 128), "file is truncated");
  c.refuse_x("trailing.npy", kGood + "xyz", "trailing bytes");
}

TEST_CASE("bad .npy: a header promising 10^12 elements fails on the file size, before any allocation",
          "[cli][bad_input]") {
  Case c;
  const std::string huge = npy_bytes(dict("<f4", "(1000000, 1000000)"), f32_data(32));
  c.refuse_x("huge.npy", huge, "header promises 1000000000000 elements");
// gcc defines __SANITIZE_ADDRESS__; clang 14 (the asan preset) only answers __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LNORM_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(LNORM_TEST_SANITIZED)
  WARN("skipped the address-space limit: sanitizers reserve terabytes of shadow memory");
#else
  // Under a 2 GiB address-space limit a 4 TB allocation would fail with "out of memory"; the refusal
  // must come from the size check instead.
  const Result r = cli("reference --x " + (c.t / "huge.npy") + " --y " + c.y);
  REQUIRE(r.code == 2);
  const Result limited =
      cli("reference --x " + (c.t / "huge.npy") + " --y " + c.y, "ulimit -v 2097152; ");
  CHECK(limited.code == 2);
  CHECK_THAT(limited.out, Contains("file is truncated"));
#endif
  c.refuse_x("overflow.npy", npy_bytes(dict("<f8", "(4294967296, 4294967296)"), ""), "overflows int64");
  c.refuse_x("int64.npy", npy_bytes(dict("<f4", "(99999999999999999999,)"), ""), "does not fit in int64");
}

TEST_CASE("bad .npy: negative or malformed shapes name the shape", "[cli][bad_input]") {
  Case c;
  c.refuse_x("negative.npy", npy_bytes(dict("<f4", "(-4, 8)"), f32_data(32)), "negative dimension -4");
  c.refuse_x("string_dim.npy", npy_bytes(dict("<f4", "(4, 'a')"), f32_data(32)), "non-integer dimension");
  c.refuse_x("float_dim.npy", npy_bytes(dict("<f4", "(4, 8.0)"), f32_data(32)), "non-integer dimension");
  c.refuse_x("not_tuple.npy", npy_bytes(dict("<f4", "32"), f32_data(32)), "shape must be a tuple");
  c.refuse_x("unclosed.npy", npy_bytes(dict("<f4", "(4, 8"), f32_data(32)), "malformed header");
  c.refuse_x("no_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False}", f32_data(32)),
             "missing the key 'shape'");
  c.refuse_x("scalar.npy", npy_bytes(dict("<f4", "()"), f32_data(1)), "0-d scalar");
}


TEST_CASE(".npy: a Fortran-order x (np.save of a transposed array) gives the answer of its C-order twin", "[cli][npy]") {
  TempDir t;
  // A 4x8 array with distinct rows, stored once row-major and once column-major.
  std::vector<float> v(32);
  for (std::size_t i = 0; i < 32; ++i) v[i] = static_cast<float>((i * 37) % 11) - 5.0f + 0.25f * static_cast<float>(i / 8);
  std::string c_bytes(128, '\0'), f_bytes(128, '\0');
  std::memcpy(c_bytes.data(), v.data(), 128);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t k = 0; k < 8; ++k) std::memcpy(f_bytes.data() + (k * 4 + r) * 4, &v[r * 8 + k], 4);
  write_file(t / "c.npy", npy_bytes(dict("<f4", "(4, 8)"), c_bytes));
  write_file(t / "f.npy", npy_bytes(dict("<f4", "(4, 8)", "True"), f_bytes));
  for (const char* x : {"c", "f"}) {
    const Result r = cli(std::string("reference --x ") + (t / (std::string(x) + ".npy")) + " --y " + (t / (std::string(x) + "_y.npy")));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  CHECK(load_f32(t / "c_y.npy") == load_f32(t / "f_y.npy"));
  // check streams rows from it too: the C-order answer passes against the Fortran-order x.
  const Result r = cli("check --x " + (t / "f.npy") + " --y " + (t / "c_y.npy"));
  INFO(r.out);
  CHECK(r.code == 0);
}

TEST_CASE("bad .npy: an unsupported dtype is refused, listing the supported ones", "[cli][bad_input]") {
  Case c;
  for (const char* descr : {"<i4", "<c8", "<f16", "|b1"}) {
    const std::string bytes = npy_bytes(dict(descr, "(4, 8)"), f32_data(32));
    c.refuse_x("dtype.npy", bytes, std::string("unsupported dtype '") + descr + "'");
    c.refuse_x("dtype.npy", bytes, "supported: '<f4' (f32), '<f8' (f64), '<f2' (f16), '<u2' (bf16");
  }
  // One-byte arrays are quantized outputs (--q) and mx scales: read, but never taken as x.
  for (const char* descr : {"|u1", "|i1"})
    c.refuse_x("q.npy", npy_bytes(dict(descr, "(4, 8)"), std::string(32, '\0')), std::string("holds '") + descr + "', a quantized output's dtype");
  c.refuse_x("structured.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 8), }",
                                         f32_data(32)),
             "unsupported dtype");
}

TEST_CASE("bad .npy: big-endian data is refused clearly, with the conversion to use", "[cli][bad_input]") {
  Case c;
  for (const char* descr : {">f4", ">f8", ">f2", ">u2"}) {
    const std::string bytes = npy_bytes(dict(descr, "(4, 8)"), std::string(32 * 8, '\0').substr(0, 32 * (descr[2] - '0')));
    c.refuse_x("big.npy", bytes, std::string("big-endian dtype '") + descr + "'");
    c.refuse_x("big.npy", bytes, "astype('<");
  }
}

TEST_CASE("bad .npy: gamma, beta and the candidate are checked like x", "[cli][bad_input]") {
  Case c;
  write_file(c.t / "bad.npy", npy_bytes(dict("<i4", "(8,)"), f32_data(8)));  // an unsupported dtype
  expect_refused(c.t, "reference --x " + c.x + " --gamma " + (c.t / "bad.npy") + c.outs, c.t / "bad.npy");
  expect_refused(c.t, "reference --x " + c.x + " --beta " + (c.t / "bad.npy") + c.outs, c.t / "bad.npy");
  write_file(c.t / "short.npy", kGood.substr(0, kGood.size() - 4));
  expect_refused(c.t, "check --x " + c.x + " --y " + (c.t / "short.npy") + " --json " + (c.t / "j.json"),
                 c.t / "short.npy");
}

TEST_CASE("bad flags: an unknown kernel is refused, listing the known ones", "[cli][bad_input]") {
  Case c;
  for (const std::string& cmd : std::vector<std::string>{"run --kernel fastest --x " + c.x + c.outs, "verify --kernel fastest"}) {
    expect_refused(c.t, cmd, "--kernel fastest: no such kernel");
    for (const char* k : {"naive", "onepass", "welford", "avx2"}) CHECK_THAT(cli(cmd).out, Contains(k));
  }
}

// A budget of -1 or nan once read as the flag's unset value ("the default"), and --seed -1 wrapped to 2^64 - 1.
TEST_CASE("bad flags: a negative or NaN budget, and a negative or too large seed, are refused naming the flag", "[cli][bad_input]") {
  Case c;
  const std::string check = "check --x " + c.x + " --y " + c.x;
  for (const std::string flag : {"--max-ulp", "--max-ulp-per-kappa", "--max-mean-ulp", "--max-rstd-ulp", "--max-h-ulp", "--max-recipe-ulp"})
    for (const char* v : {"-1", "nan", "-inf", "abc"}) expect_refused(c.t, check + " " + flag + " " + v, flag + std::string(": must be a number >= 0"));
  for (const std::string flag : {"--max-q-ulp", "--max-scale-ulp"})
    expect_refused(c.t, check + " --quant int8 --scaling row --q " + c.x + " " + flag + " -1", flag + ": must be a number >= 0");
  expect_refused(c.t, "select --shape 4x8 --max-ulp nan", "--max-ulp: must be a number >= 0");
  expect_refused(c.t, "check --dir bwd --x " + c.x + " --dy " + c.x + " --dx " + c.x + " --max-dx-ulp -0.5", "--max-dx-ulp: must be a number >= 0");
  expect_refused(c.t, "verify --seed -1", "--seed: must be a whole number");
  expect_refused(c.t, "verify --seed 18446744073709551616", "--seed: must be at most 18446744073709551615");
  expect_refused(c.t, "gen --seed -5 --shape 2x2 --out " + (c.t / "g.npy"), "--seed: must be a whole number");
  expect_refused(c.t, "report --seed -1 --out " + (c.t / "r"), "--seed: must be a whole number");
  // inf is a budget (no flat limit), and the seed's whole range is taken.
  CHECK(cli(check + " --max-ulp inf").code != 2);
  const Result top = cli("verify --seed 18446744073709551615 --kernel naive --op layernorm --dtype f32 --property shape --quick");
  CHECK(top.code == 0);
  CHECK_THAT(top.out, Contains("seed 18446744073709551615"));
}

// An empty value where the unset value is "" once meant "not given": --shard '' ran every cell, --recipe '' was
// accepted and gated nothing, --json '' wrote no file for the CI job that reads it.
TEST_CASE("bad flags: an empty --shard, --recipe or --json is refused, not read as absent", "[cli][bad_input]") {
  Case c;
  expect_refused(c.t, "verify --shard ''", "--shard: must not be empty");
  expect_refused(c.t, "verify --json ''", "--json: must not be empty");
  expect_refused(c.t, "verify --junit ''", "--junit: must not be empty");
  expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --recipe ''", "--recipe: must not be empty");
  expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --json ''", "--json: must not be empty");
}

// A full disk under the second output: the first used to be left in place (gen's x.npy without its gamma,
// reference's y.npy without its mean). Outputs are a set: all, or none. Needs a 64 KiB tmpfs (root, as CI runs).
TEST_CASE("outputs: a full disk under a later output leaves none of the command's outputs", "[cli][bad_input]") {
  Case c;
  const std::string tiny = c.t / "tiny";
  fs::create_directories(tiny);
  if (std::system(("mount -t tmpfs -o size=64k tmpfs '" + tiny + "' 2>/dev/null").c_str()) != 0) {
    WARN("cannot mount a tmpfs here (not root?): the full-disk case is not checked");
    return;
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { (void)std::system(("umount '" + dir + "'").c_str()); }
  } unmount{tiny};
  // x: 14 x 1024 f32, 56 KiB and its header, which fit in the 64 KiB; gamma's 4 KiB and header do not.
  const Result gen = cli("gen --shape 14x1024 --out " + tiny + "/x.npy --gamma-out " + tiny + "/g.npy");
  INFO(gen.out);
  CHECK(gen.code == 2);
  CHECK_THAT(gen.out, Contains(tiny + "/g.npy"));
  CHECK(fs::is_empty(tiny));
  REQUIRE(cli("gen --shape 14x1024 --out " + (c.t / "x14.npy")).code == 0);
  const Result ref = cli("reference --x " + (c.t / "x14.npy") + " --y " + tiny + "/y.npy --mean " + tiny + "/m.npy --rstd " +
                         tiny + "/r.npy");
  INFO(ref.out);
  CHECK(ref.code == 2);
  CHECK(fs::is_empty(tiny));
}

// A shape past memory is refused before anything is allocated (select grew to 1.7 GB and never ended).
TEST_CASE("bench, select: a shape too large for the machine's memory is refused at once", "[cli][bad_input]") {
  Case c;
  for (const char* cmd : {"select --quant int8", "bench --kernel naive", "select"})
    expect_refused(c.t, std::string(cmd) + " --shape 4294967296x4294967296", "shape too large");
}

// A selection with no cell printed "PASS: 0 passed, 0 failed" and exited 0: a CI gate that gated nothing.
TEST_CASE("verify: a selection with no cell is refused, naming why, not a vacuous PASS", "[cli][bad_input]") {
  Case c;
  // The backward ops have no quantized property; onepass writes no quantized output.
  expect_refused(c.t, "verify --dir bwd --property quantized", "nothing to verify");
  expect_refused(c.t, "verify --kernel onepass --property quantized", "nothing to verify");
  // A kernel that does write quantized outputs has its cells.
  CHECK(cli("verify --kernel naive --op rmsnorm --dtype f32 --property quantized --quick --cases 12").code == 0);
}

TEST_CASE("bad flags: an unknown dtype is refused, listing the known ones", "[cli][bad_input]") {
  Case c;
  for (const std::string& cmd : std::vector<std::string>{"run --kernel welford --x " + c.x + " --dtype f8" + c.outs,
                                "reference --x " + c.x + " --dtype float" + c.outs,
                                "select --shape 4x4 --dtype f3", "verify --dtype half"}) {
    expect_refused(c.t, cmd, "--dtype");
    CHECK_THAT(cli(cmd).out, Contains("f32, f64, f16 or bf16"));
  }
  expect_refused(c.t, "gen --out " + (c.t / "g.npy") + " --dtype i8", "--dtype");
}

TEST_CASE("bad flags: an axis out of range or not a number names --axis and the valid range", "[cli][bad_input]") {
  Case c;
  for (const char* axis : {"2", "-3", "99", "-2147483648"}) {
    expect_refused(c.t, "reference --x " + c.x + " --axis " + axis + c.outs, "--axis");
    expect_refused(c.t, "reference --x " + c.x + " --axis " + axis + c.outs, "valid: -2 .. 1");
  }
  expect_refused(c.t, "reference --x " + c.x + " --axis abc" + c.outs, "--axis");
  expect_refused(c.t, "reference --x " + c.x + " --axis 99999999999" + c.outs, "--axis");
}

TEST_CASE("bad flags: eps negative, NaN or infinite is refused naming --eps", "[cli][bad_input]") {
  Case c;
  for (const char* eps : {"-1", "-1e-30", "nan", "-nan", "inf", "-inf", "1e400", "abc"}) {
    expect_refused(c.t, "run --kernel welford --x " + c.x + " --eps=" + eps + c.outs, "--eps");
    expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --eps=" + eps, "--eps");
  }
}

TEST_CASE("bad flags: gamma or beta of the wrong shape or dtype name the file and both shapes", "[cli][bad_input]") {
  Case c;
  write_file(c.t / "g7.npy", npy_bytes(dict("<f4", "(7,)"), f32_data(7)));
  write_file(c.t / "g2d.npy", npy_bytes(dict("<f4", "(2, 4)"), f32_data(8)));
  write_file(c.t / "g_f8.npy", npy_bytes(dict("<f8", "(8,)"), std::string(64, '\0')));
  write_file(c.t / "g_f2.npy", npy_bytes(dict("<f2", "(8,)"), std::string(16, '\0')));
  for (const char* flag : {"--gamma", "--beta"}) {
    const std::string run = std::string("run --kernel welford --x ") + c.x + " " + flag + " ";
    expect_refused(c.t, run + (c.t / "g7.npy") + c.outs, c.t / "g7.npy");
    expect_refused(c.t, run + (c.t / "g7.npy") + c.outs, "has shape 7 but the normalized dims of x are 8");
    expect_refused(c.t, run + (c.t / "g2d.npy") + c.outs, "has shape 2x4");
    expect_refused(c.t, run + (c.t / "g_f8.npy") + c.outs, "holds '<f8' but x holds '<f4'");
    expect_refused(c.t, run + (c.t / "g_f2.npy") + c.outs, c.t / "g_f2.npy");
  }
}

TEST_CASE("bad flags: a check candidate of another shape or dtype names the candidate", "[cli][bad_input]") {
  Case c;
  write_file(c.t / "c84.npy", npy_bytes(dict("<f4", "(8, 4)"), f32_data(32)));
  write_file(c.t / "c32.npy", npy_bytes(dict("<f4", "(32,)"), f32_data(32)));
  write_file(c.t / "c_f8.npy", npy_bytes(dict("<f8", "(4, 8)"), std::string(256, '\0')));
  const std::string json = " --json " + (c.t / "j.json");
  expect_refused(c.t, "check --x " + c.x + " --y " + (c.t / "c84.npy") + json, "has shape 8x4 but x has shape 4x8");
  expect_refused(c.t, "check --x " + c.x + " --y " + (c.t / "c32.npy") + json, c.t / "c32.npy");
  expect_refused(c.t, "check --x " + c.x + " --y " + (c.t / "c_f8.npy") + json, c.t / "c_f8.npy");
  write_file(c.t / "m5.npy", npy_bytes(dict("<f4", "(5, 1)"), f32_data(5)));
  expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --mean " + (c.t / "m5.npy") + json, c.t / "m5.npy");
}

TEST_CASE("bad flags: an output into a missing folder, or into a folder, is refused before any work",
          "[cli][bad_input]") {
  Case c;
  const std::string missing = c.t / "no/such/dir/y.npy";
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + missing, "--y: " + missing);
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + missing, "does not exist");
  expect_refused(c.t, "reference --x " + c.x + " --y " + c.y + " --rstd " + missing, "--rstd");
  expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --json " + (c.t / "nodir/j.json"), "--json");
  expect_refused(c.t, "verify --quick --kernel naive --json " + (c.t / "nodir/j.json"), "--json");
  expect_refused(c.t, "gen --out " + missing, missing);
  expect_refused(c.t, "gen --out " + c.y + " --gamma-out " + missing, "--gamma-out");
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + (c.t / "x.npy/y.npy"), "is not a folder");
  // An existing folder as the output: refused up front, not after the work when the rename fails.
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + c.t.dir.string(), "is a folder");
  expect_refused(c.t, "gen --out " + c.t.dir.string(), "is a folder");
}

TEST_CASE("bad flags: an output that is an input or another output is refused, the input untouched",
          "[cli][bad_input]") {
  Case c;
  const std::string before = file_bytes(c.x);
  write_file(c.t / "g.npy", npy_bytes(dict("<f4", "(8,)"), f32_data(8)));
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + c.x, "--y: " + c.x + " is also an input");
  expect_refused(c.t, "reference --x " + c.x + " --y " + c.y + " --mean " + c.x, "--mean");
  expect_refused(c.t, "reference --x " + c.x + " --gamma " + (c.t / "g.npy") + " --y " + (c.t / "g.npy"),
                 "is also an input");
  // The same file under another name: a relative path, a symbolic link.
  fs::create_symlink(c.x, c.t / "link.npy");
  expect_refused(c.t, "run --kernel welford --x " + c.x + " --y " + (c.t / "link.npy"), "is also an input");
  expect_refused(c.t, "check --x " + c.x + " --y " + c.x + " --json " + c.x, "--json");
  expect_refused(c.t, "reference --x " + c.x + " --y " + c.y + " --rstd " + c.y, "is also the --y output");
  expect_refused(c.t, "gen --out " + c.y + " --gamma-out " + c.y, "is also the --out output");
  CHECK(file_bytes(c.x) == before);
}

TEST_CASE("zero rows are a valid empty problem and zero width is an error", "[cli][bad_input]") {
  Case c;
  write_file(c.t / "rows0.npy", npy_bytes(dict("<f4", "(0, 8)"), ""));
  write_file(c.t / "rows0_3d.npy", npy_bytes(dict("<f4", "(2, 0, 8)"), ""));
  for (const std::string& x : std::vector<std::string>{c.t / "rows0.npy", c.t / "rows0_3d.npy"}) {
    for (const std::string& cmd : std::vector<std::string>{"reference", "run --kernel avx2", "run --kernel naive"}) {
      const Result r = cli(cmd + " --x " + x + c.outs);
      INFO(cmd << " " << x << ": " << r.out);
      CHECK(r.code == 0);
      CHECK(fs::exists(c.y));
      CHECK(fs::exists(c.t / "m.npy"));
      fs::remove(c.y);
    }
    CHECK(cli("check --x " + x + " --y " + x).code == 0);
  }
  for (const char* shape : {"(4, 0)", "(0,)", "(0, 0)", "(4, 8, 0)"}) {
    const std::string bytes = npy_bytes(dict("<f4", shape), "");
    c.refuse_x("width0.npy", bytes, "zero width");
  }
}
