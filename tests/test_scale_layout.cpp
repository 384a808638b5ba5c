// --scale-layout (lnorm/scale_layout.hpp, docs/cli.md "Scale layouts"): the scales' col and swizzled layouts against
// their definitions written out here, and `reference`/`run`/`check` writing and reading them: the same scales as the
// row layout, moved; a swizzled file with garbage in its padding, or row-major bytes handed as swizzled, fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/scale_layout.hpp"

using namespace lnorm;
using namespace lnorm::testing;
using Catch::Matchers::Contains;

namespace {

// cuBLAS's block-scaling-factors layout as torchao's to_blocked builds it (padded.view(nrb, 128, ncb, 4)
// .permute(0, 2, 1, 3).reshape(-1, 4, 32, 4).transpose(1, 2)): the padded [rows, cols] matrix walked in the order
// [row tile, column tile, row % 32, (row % 128) / 32, column % 4], each visit the next stored scale. Nothing here
// is stored_scale_index's formula; the padding is 0.
std::vector<std::uint8_t> blocked_by_walk(const std::vector<std::uint8_t>& m, std::int64_t rows, std::int64_t cols) {
  const std::int64_t nrb = (rows + 127) / 128, ncb = (cols + 3) / 4;
  std::vector<std::uint8_t> out;
  for (std::int64_t rb = 0; rb < nrb; ++rb)
    for (std::int64_t cb = 0; cb < ncb; ++cb)
      for (std::int64_t b = 0; b < 32; ++b)
        for (std::int64_t a = 0; a < 4; ++a)
          for (std::int64_t c = 0; c < 4; ++c) {
            const std::int64_t r = rb * 128 + a * 32 + b, g = cb * 4 + c;
            out.push_back(r < rows && g < cols ? m[static_cast<std::size_t>(r * cols + g)] : 0);
          }
  return out;
}


}  // namespace

TEST_CASE("scale layouts: swizzled is torchao's to_blocked walk and col the transpose, both converting back", "[quant][layout]") {
  for (const std::int64_t rows : {1, 31, 128, 129, 300})
    for (const std::int64_t cols : {1, 3, 4, 6, 9}) {
      INFO(rows << " x " << cols);
      std::vector<std::uint8_t> m(static_cast<std::size_t>(rows * cols));
      for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint8_t>(1 + i % 251);  // never 0: padding shows
      const std::vector<std::uint8_t> want = blocked_by_walk(m, rows, cols);
      REQUIRE(stored_scale_count(ScaleLayout::swizzled, rows, cols) == static_cast<std::int64_t>(want.size()));
      std::vector<std::uint8_t> got(want.size(), 0xee);
      scales_to_layout(ScaleLayout::swizzled, rows, cols, 1, m.data(), got.data());
      CHECK(got == want);
      CHECK(nonzero_padding(ScaleLayout::swizzled, rows, cols, 1, got.data()) == 0);
      std::vector<std::uint8_t> back(m.size());
      scales_from_layout(ScaleLayout::swizzled, rows, cols, 1, got.data(), back.data());
      CHECK(back == m);
      if (want.size() > m.size()) {  // one padding byte set is counted
        got.back() = 1;
        CHECK(nonzero_padding(ScaleLayout::swizzled, rows, cols, 1, got.data()) == 1);
      }
      // col: scale g of row r at g·rows + r, f32 scales (4 bytes each) moved whole.
      std::vector<float> f(m.begin(), m.end()), fc(f.size()), fb(f.size());
      scales_to_layout(ScaleLayout::col, rows, cols, 4, f.data(), fc.data());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < cols; ++g) CHECK(fc[static_cast<std::size_t>(g * rows + r)] == f[static_cast<std::size_t>(r * cols + g)]);
      scales_from_layout(ScaleLayout::col, rows, cols, 4, fc.data(), fb.data());
      CHECK(fb == f);
    }
  CHECK(stored_scales_shape(ScaleLayout::row, {2, 3}, 5) == std::vector<std::int64_t>{2, 3, 5});
  CHECK(stored_scales_shape(ScaleLayout::col, {2, 3}, 5) == std::vector<std::int64_t>{5, 2, 3});
  CHECK(stored_scales_shape(ScaleLayout::swizzled, {2, 3}, 5) == std::vector<std::int64_t>{128 * 8});
}

TEST_CASE("reference/run --scale-layout write the row layout's scales moved, and check reads them back and fails planted "
          "padding or row-major bytes handed as swizzled (CLI)", "[cli][quant][layout]") {
  TempDir t;
  // 3 x 70 rows (210: a partial second row tile) of 96 (6 nvfp4 blocks, 3 mx groups: partial column tiles).
  std::vector<float> x(3 * 70 * 96);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.61f * static_cast<float>(i)) * (i % 97 == 5 ? 7.0f : 1.0f);
  io::save(t / "x.npy", "<f4", {3, 70, 96}, x.data());
  const std::int64_t rows = 210;
  for (const std::string& spec : {std::string("fp4_e2m1 --scaling nvfp4 --global-scale 100"), std::string("fp4_e2m1 --scaling mx"),
                                  std::string("fp8_e4m3 --scaling mx --mx-rule rceil"),
                                  std::string("int8 --scaling group:16 --scale-format ue8m0"),
                                  std::string("fp8_e4m3 --scaling group:32")}) {
    INFO(spec);
    const auto has = [&](const char* word) { return spec.find(word) != std::string::npos; };
    const bool one_byte = !has("group:32");  // f32 scales
    const std::int64_t per_row = has("nvfp4") || has("group:16") ? 6 : 3;  // 96 / 16, 96 / 32
    const std::string a = "--op rmsnorm --x " + (t / "x.npy") + " --quant " + spec + " --q " + (t / "q.npy");
    REQUIRE(cli("reference " + a + " --scales " + (t / "row.npy")).code == 0);
    const std::vector<std::uint8_t> row = npy_bytes(t / "row.npy");
    const std::size_t bytes = one_byte ? 1 : 4;
    REQUIRE(row.size() == static_cast<std::size_t>(rows * per_row) * bytes);

    REQUIRE(cli("reference " + a + " --scales " + (t / "col.npy") + " --scale-layout col").code == 0);
    CHECK(io::NpyReader(t / "col.npy").header().shape == std::vector<std::int64_t>{per_row, 3, 70});
    const std::vector<std::uint8_t> col = npy_bytes(t / "col.npy");
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t g = 0; g < per_row; ++g)
        for (std::size_t b = 0; b < bytes; ++b)
          CHECK(col[static_cast<std::size_t>(g * rows + r) * bytes + b] == row[static_cast<std::size_t>(r * per_row + g) * bytes + b]);
    const Result cc = cli("check " + a + " --scales " + (t / "col.npy") + " --scale-layout col");
    INFO(cc.out);
    CHECK(cc.code == 0);

    const Result sw = cli("reference " + a + " --scales " + (t / "sw.npy") + " --scale-layout swizzled");
    if (!one_byte) {  // the tiles hold one-byte codes
      CHECK(sw.code == 2);
      CHECK_THAT(sw.out, Contains("one-byte scale codes"));
      continue;
    }
    REQUIRE(sw.code == 0);
    CHECK(io::NpyReader(t / "sw.npy").header().shape == std::vector<std::int64_t>{256 * ((per_row + 3) / 4 * 4)});  // 210 → 256 rows
    const std::vector<std::uint8_t> swizzled = npy_bytes(t / "sw.npy");
    CHECK(swizzled == blocked_by_walk(row, rows, per_row));
    const std::string c = "check " + a + " --scale-layout swizzled --json " + (t / "r.json") + " --scales ";
    CHECK(cli(c + (t / "sw.npy")).code == 0);
    // A kernel's scales through the same boundary: avx2_cr's (exact codes and scales) are the reference's.
    REQUIRE(cli("run --kernel avx2_cr " + a + " --scales " + (t / "k.npy") + " --scale-layout swizzled").code == 0);
    CHECK(npy_bytes(t / "k.npy") == swizzled);
    // Garbage in one padding byte: the scales fail, and say why.
    std::vector<std::uint8_t> pad = swizzled;
    pad.back() = 0x7e;
    io::save(t / "pad.npy", "|u1", {static_cast<std::int64_t>(pad.size())}, pad.data());
    const Result rp = cli(c + (t / "pad.npy"));
    CHECK(rp.code == 1);
    CHECK_THAT(rp.out, Contains("1 padding scale not 0"));
    CHECK(load_json(t / "r.json")["scales"]["padding_nonzero"] == 1);
    // The row layout's bytes, padded to the swizzled size, handed as swizzled: scales land on the wrong rows.
    std::vector<std::uint8_t> wrong(swizzled.size(), 0);
    std::copy(row.begin(), row.end(), wrong.begin());
    io::save(t / "wrong.npy", "|u1", {static_cast<std::int64_t>(wrong.size())}, wrong.data());
    CHECK(cli(c + (t / "wrong.npy")).code == 1);
    // The row file handed as swizzled: its shape is refused, naming the layout.
    const Result rs = cli(c + (t / "row.npy"));
    CHECK(rs.code == 2);
    CHECK_THAT(rs.out, Contains("--scale-layout swizzled"));
  }
  const std::string x_only = "--x " + (t / "x.npy") + " --q " + (t / "q.npy");
  const Result tensor = cli("reference " + x_only + " --quant fp8_e4m3 --scale 1 --scale-layout col");
  CHECK(tensor.code == 2);
  CHECK_THAT(tensor.out, Contains("tensor scaling stores no scales"));
  const Result unknown = cli("reference " + x_only + " --quant int8 --scaling row --scales " + (t / "s.npy") + " --scale-layout diag");
  CHECK(unknown.code == 2);
  CHECK_THAT(unknown.out, Contains("expected row, col or swizzled"));
  CHECK(cli("reference " + x_only + " --scale-layout col").code == 2);
}
