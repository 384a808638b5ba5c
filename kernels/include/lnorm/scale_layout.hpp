// The scales' layouts (lnorm/quant.hpp ScaleLayout) as conversions at the file and array boundary: kernels, plugins
// and the metric see scales row-major (row r's scale g at r·per_row + g); reference, run and Python write them in the
// asked layout, check and Python's check read them back. rows: the flattened x.shape[:axis].
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lnorm/quant.hpp"

namespace lnorm {

// Scales stored in the layout: rows·per_row, or swizzled's padded round_up(rows, 128)·round_up(per_row, 4).
std::int64_t stored_scale_count(ScaleLayout layout, std::int64_t rows, std::int64_t per_row);
// Where row r's scale g is stored, in scales (not bytes). swizzled: tile (r/128, g/4) of 512, inside it row r%32's
// 16 bytes, (r%128)/32 picking 4 of them and g%4 one: [mTiles, kTiles, 32, 4, 4] (FlashInfer's offset formula).
std::int64_t stored_scale_index(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::int64_t r, std::int64_t g);
// The array's shape in the layout, from x.shape[:axis] (lead) and the scales per row.
std::vector<std::int64_t> stored_scales_shape(ScaleLayout layout, const std::vector<std::int64_t>& lead, std::int64_t per_row);
// Row-major scales of `bytes` each into the layout (the padding zeroed), and back.
void scales_to_layout(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* row_major,
                      void* stored);
void scales_from_layout(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* stored,
                        void* row_major);
// Swizzled's padding scales that are not 0 (FlashInfer writes the padding 0; a GEMM reads it for the padded rows,
// so garbage there is garbage in a partial tile's output). 0 for row and col, which have none.
std::int64_t nonzero_padding(ScaleLayout layout, std::int64_t rows, std::int64_t per_row, std::size_t bytes, const void* stored);

}  // namespace lnorm
