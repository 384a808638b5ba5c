// lnorm/scale_layout.hpp: the scales' layouts.
#include "lnorm/scale_layout.hpp"

#include <cstring>

namespace lnorm {

namespace {
constexpr std::int64_t kTileRows = 128, kTileCols = 4;  // cuBLAS's 128x4 scale tiles: 32 rows x 4 groups of them
std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }
}  // namespace

std::int64_t stored_scale_count(ScaleLayout layout, std::int64_t rows, std::int64_t per_row) {
  if (layout == ScaleLayout::swizzled) return round_up(rows, kTileRows) * round_up(per_row, kTileCols);
  return rows * per_row;
}

std::int64_t stored_scale_index(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::int64_t r, std::int64_t g) {
  switch (layout) {
    case ScaleLayout::row: return r * per_row + g;
    case ScaleLayout::col: return g * rows + r;
    case ScaleLayout::swizzled: {
      const std::int64_t k_tiles = round_up(per_row, kTileCols) / kTileCols;
      return (r / kTileRows) * (k_tiles * 512) + (g / kTileCols) * 512 + (r % 32) * 16 + ((r % kTileRows) / 32) * 4 + g % kTileCols;
    }
  }
  return r * per_row + g;
}

std::vector<std::int64_t> stored_scales_shape(ScaleLayout layout, const std::vector<std::int64_t>& lead, std::int64_t per_row) {
  std::int64_t rows = 1;
  for (std::int64_t d : lead) rows *= d;
  switch (layout) {
    case ScaleLayout::row: {
      std::vector<std::int64_t> s = lead;
      s.push_back(per_row);
      return s;
    }
    case ScaleLayout::col: {
      std::vector<std::int64_t> s{per_row};
      s.insert(s.end(), lead.begin(), lead.end());
      return s;
    }
    case ScaleLayout::swizzled: return {stored_scale_count(layout, rows, per_row)};
  }
  return {};
}

void scales_to_layout(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* row_major,
                      void* stored) {
  auto* out = static_cast<unsigned char*>(stored);
  const auto* in = static_cast<const unsigned char*>(row_major);
  if (layout == ScaleLayout::swizzled) std::memset(out, 0, static_cast<std::size_t>(stored_scale_count(layout, rows, per_row)) * bytes);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < per_row; ++g)
      std::memcpy(out + static_cast<std::size_t>(stored_scale_index(layout, rows, per_row, r, g)) * bytes,
                  in + static_cast<std::size_t>(r * per_row + g) * bytes, bytes);
}

void scales_from_layout(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* stored,
                        void* row_major) {
  const auto* in = static_cast<const unsigned char*>(stored);
  auto* out = static_cast<unsigned char*>(row_major);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < per_row; ++g)
      std::memcpy(out + static_cast<std::size_t>(r * per_row + g) * bytes,
                  in + static_cast<std::size_t>(stored_scale_index(layout, rows, per_row, r, g)) * bytes, bytes);
}

std::int64_t nonzero_padding(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* stored) {
  if (layout != ScaleLayout::swizzled) return 0;
  const std::int64_t n = stored_scale_count(layout, rows, per_row);
  std::vector<char> real(static_cast<std::size_t>(n), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < per_row; ++g) real[static_cast<std::size_t>(stored_scale_index(layout, rows, per_row, r, g))] = 1;
  const auto* in = static_cast<const unsigned char*>(stored);
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (real[static_cast<std::size_t>(i)]) continue;
    for (std::size_t b = 0; b < bytes; ++b)
      if (in[static_cast<std::size_t>(i) * bytes + b] != 0) {
        ++count;
        break;
      }
  }
  return count;
}

}  // namespace lnorm
