#include <vector>

#include "lnorm/add.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

void reference(const Problem& p, const Tensors& t, double* kappa) {
  const std::size_t es = size_of(p.dtype);
  const Format stats = format_of(stats_dtype(p.dtype));
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    RowReferencer ref(p);
    std::vector<std::byte> h_scratch;  // Add & Norm without an h output: h is still what the norm reads
    for (std::int64_t r = begin; r < end; ++r) {
      const auto off = static_cast<std::size_t>(r * p.cols) * es;
      const void* in = static_cast<const char*>(t.x) + off;
      if (p.op.prologue == Prologue::residual_add) {  // h first, rounded once; the norm reads h as stored
        const auto hoff = static_cast<std::size_t>(r * p.cols) * size_of(p.residual_dtype);
        void* h = t.h ? static_cast<char*>(t.h) + hoff : nullptr;
        if (!h) {
          h_scratch.resize(static_cast<std::size_t>(p.cols) * size_of(p.residual_dtype));
          h = h_scratch.data();
        }
        add_row(p, in, static_cast<const char*>(t.residual) + hoff, p.cols, h, nullptr);
        in = h;
      }
      const RowReference row = ref.run(in, p.has_gamma ? t.gamma : nullptr,
                                       p.has_beta ? t.beta : nullptr, p.cols,
                                       t.y ? static_cast<char*>(t.y) + off : nullptr, nullptr);
      if (t.mean) {
        if (stats.dtype == DType::f64) static_cast<double*>(t.mean)[r] = row.mean;
        else static_cast<float*>(t.mean)[r] = static_cast<float>(row.mean);
      }
      if (t.rstd) {
        if (stats.dtype == DType::f64) static_cast<double*>(t.rstd)[r] = row.rstd;
        else static_cast<float*>(t.rstd)[r] = static_cast<float>(row.rstd);
      }
      if (kappa) kappa[r] = row.kappa;
    }
  });
}

}  // namespace lnorm
