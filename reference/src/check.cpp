// Candidate output against the exact answer, row by row (moved here from the CLI's `check` so the
// Python module measures exactly the same way).
#include "lnorm/check.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "lnorm/parallel.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {
namespace {

std::uint64_t load_bits(const std::byte* p, std::size_t es, std::int64_t i) {
  switch (es) {
    case 2: return reinterpret_cast<const std::uint16_t*>(p)[i];
    case 4: return reinterpret_cast<const std::uint32_t*>(p)[i];
    default: return reinterpret_cast<const std::uint64_t*>(p)[i];
  }
}

// Every element of the row has the same value (+0 and −0 alike: x − mean is 0 either way).
bool constant_in_storage(const Format& f, const void* row, std::int64_t n) {
  const std::size_t es = size_of(f.dtype);
  const auto* b = static_cast<const std::byte*>(row);
  const double first = bits_to_double(f, load_bits(b, es, 0));
  for (std::int64_t i = 1; i < n; ++i)
    if (bits_to_double(f, load_bits(b, es, i)) != first) return false;
  return n > 0;
}

}  // namespace

void CheckSummary::merge(const CheckSummary& other) {
  y.merge(other.y);
  h.merge(other.h);
  mean.merge(other.mean);
  rstd.merge(other.rstd);
  recipe.merge(other.recipe);
  constant_rows.merge(other.constant_rows);
  constant_row_count += other.constant_row_count;
  recipe_inexact_sums += other.recipe_inexact_sums;
}

CheckSummary measure_rows(const Problem& p, const void* x, const void* gamma, const void* beta, const void* y,
                          const void* mean, const void* rstd, std::int64_t rows, std::int64_t first_row,
                          const Budget& budget, int threads, const AddInputs& add,
                          const RecipeInputs& rin) {
  const Format fmt = format_of(p.dtype), sfmt = format_of(stats_dtype(p.dtype));
  const std::size_t es = size_of(p.dtype), ss = size_of(sfmt.dtype);
  const bool fused = p.op.prologue == Prologue::residual_add;
  const Format hfmt = format_of(p.residual_dtype);
  const std::size_t hs = size_of(p.residual_dtype);
  const auto* resb = static_cast<const std::byte*>(add.residual);
  const auto* hb = static_cast<const std::byte*>(add.h);
  const auto* xb = static_cast<const std::byte*>(x);
  const auto* yb = static_cast<const std::byte*>(y);
  const auto* mb = static_cast<const std::byte*>(mean);
  const auto* rb = static_cast<const std::byte*>(rstd);
  const int t = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1)));
  std::vector<CheckSummary> parts(static_cast<std::size_t>(t));
  parallel_rows(t, t, [&](std::int64_t tb, std::int64_t te) {
    for (std::int64_t ti = tb; ti < te; ++ti) {
      const std::int64_t begin = rows * ti / t, end = rows * (ti + 1) / t;
      RowReferencer ref(p);
      std::vector<ElementReference> elems(static_cast<std::size_t>(p.cols));
      std::vector<std::byte> exact(static_cast<std::size_t>(p.cols) * es);
      std::vector<std::byte> exact_h(fused ? static_cast<std::size_t>(p.cols) * hs : 0);
      std::vector<ElementReference> sums(fused ? static_cast<std::size_t>(p.cols) : 0);
      CheckSummary& part = parts[static_cast<std::size_t>(ti)];
      std::optional<RecipeReferencer> recipe_ref;
      std::vector<std::byte> recipe_y;
      std::vector<ElementReference> recipe_elems;
      if (rin.recipe) {
        recipe_ref.emplace(p, *rin.recipe);
        recipe_y.resize(exact.size());
        recipe_elems.resize(elems.size());
      }
      for (std::int64_t r = begin; r < end; ++r) {
        const std::size_t off = static_cast<std::size_t>(r * p.cols) * es;
        const void* in = xb + off;
        if (fused) {  // the norm of the exact h, whatever the candidate's h
          const std::size_t hoff = static_cast<std::size_t>(r * p.cols) * hs;
          add_row(p, xb + off, resb + hoff, p.cols, exact_h.data(), sums.data());
          in = exact_h.data();
          for (std::int64_t i = 0; hb && i < p.cols; ++i) {
            const std::uint64_t got = load_bits(hb + hoff, hs, i);
            part.h.add(hfmt, (first_row + r) * p.cols + i, bits_to_double(hfmt, got), got,
                       load_bits(exact_h.data(), hs, i), sums[static_cast<std::size_t>(i)], 0.0, add.h_budget);
          }
        }
        const RowReference row = ref.run(in, gamma, beta, p.cols, exact.data(), elems.data());
        const bool constant = p.op.norm == Norm::layernorm && !row.nonfinite && constant_in_storage(fused ? hfmt : fmt, in, p.cols);
        part.constant_row_count += constant;
        // The bias gate's unit: a row shares its mean's and rstd's errors. Counted once per distinct input row (x, and
        // the residual), and only when it added a signed error; a row constant in storage is judged apart (below).
        const std::int64_t signed_before = part.y.signed_elements;
        for (std::int64_t i = 0; yb && i < p.cols; ++i) {
          const std::uint64_t got = load_bits(yb + off, es, i);
          part.y.add(fmt, (first_row + r) * p.cols + i, bits_to_double(fmt, got), got, load_bits(exact.data(), es, i),
                     elems[static_cast<std::size_t>(i)], row.kappa, budget, /*bias=*/!constant);
          if (constant)
            part.constant_rows.add(fmt, (first_row + r) * p.cols + i, bits_to_double(fmt, got), got,
                                   load_bits(exact.data(), es, i), elems[static_cast<std::size_t>(i)], 0.0, {budget.a, 0});
        }
        if (part.y.signed_elements > signed_before) {
          UnitKey key;
          key.bytes(xb + off, static_cast<std::size_t>(p.cols) * es);
          if (fused) key.bytes(resb + static_cast<std::size_t>(r * p.cols) * hs, static_cast<std::size_t>(p.cols) * hs);
          part.y.add_unit(key.value());
        }
        if (recipe_ref && yb) {
          const void* res = fused ? static_cast<const void*>(resb + static_cast<std::size_t>(r * p.cols) * hs) : nullptr;
          part.recipe_inexact_sums +=
              recipe_ref->run(xb + off, res, gamma, beta, p.cols, recipe_y.data(), recipe_elems.data());
          for (std::int64_t i = 0; i < p.cols; ++i) {
            const std::uint64_t got = load_bits(yb + off, es, i);
            part.recipe.add(fmt, (first_row + r) * p.cols + i, bits_to_double(fmt, got), got,
                            load_bits(recipe_y.data(), es, i), recipe_elems[static_cast<std::size_t>(i)], row.kappa,
                            rin.budget);
          }
        }
        if (mb) part.mean.add(Stat::mean, sfmt, first_row + r, bits_to_double(sfmt, load_bits(mb, ss, r)), row);
        if (rb) part.rstd.add(Stat::rstd, sfmt, first_row + r, bits_to_double(sfmt, load_bits(rb, ss, r)), row);
      }
    }
  });
  CheckSummary out;
  for (const CheckSummary& part : parts) out.merge(part);
  return out;
}

ErrorSummary measure_gradient(Gradient g, const Problem& p, const void* x, const void* dy, const void* got,
                              const void* exact, const BackwardReference& ref, const Budget& budget) {
  const DType d = g == Gradient::dx ? p.dtype : p.param_dtype;
  const Format f = format_of(d);
  const std::vector<ElementReference>& elems = g == Gradient::dx ? ref.dx : g == Gradient::dgamma ? ref.dgamma : ref.dbeta;
  const std::size_t xs = size_of(p.dtype);
  const auto* xb = static_cast<const std::byte*>(x);
  const auto* dyb = static_cast<const std::byte*>(dy);
  ErrorSummary s;
  const std::int64_t per_unit = g == Gradient::dx ? p.cols : 1;
  for (std::int64_t u = 0; u * per_unit < static_cast<std::int64_t>(elems.size()); ++u) {
    const std::int64_t before = s.signed_elements;
    for (std::int64_t i = u * per_unit; i < (u + 1) * per_unit; ++i) {
      const std::uint64_t b = bits_at(d, got, i);
      const double kappa = g == Gradient::dx ? ref.row_kappa[static_cast<std::size_t>(u)]
                           : g == Gradient::dgamma ? ref.dgamma_kappa[static_cast<std::size_t>(i)] : 0.0;
      s.add(f, i, bits_to_double(f, b), b, bits_at(d, exact, i), elems[static_cast<std::size_t>(i)], kappa, budget);
    }
    if (s.signed_elements == before) continue;
    UnitKey key;
    if (g == Gradient::dx) {
      const std::size_t row = static_cast<std::size_t>(u * p.cols) * xs, bytes = static_cast<std::size_t>(p.cols) * xs;
      key.bytes(xb + row, bytes).bytes(dyb + row, bytes);
    } else {
      for (std::int64_t r = 0; r < p.rows; ++r) {  // column u, down the rows
        const std::size_t at = static_cast<std::size_t>(r * p.cols + u) * xs;
        key.bytes(dyb + at, xs);
        if (g == Gradient::dgamma) key.bytes(xb + at, xs);
      }
    }
    s.add_unit(key.value());
  }
  return s;
}

}  // namespace lnorm
