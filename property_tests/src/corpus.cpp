#include "lnorm/corpus.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "properties.hpp"

namespace lnorm::verify {

namespace {

RowClass row_class_named(std::string_view s) {
  for (int i = 0; i < kRowClassCount; ++i)
    if (name(static_cast<RowClass>(i)) == s) return static_cast<RowClass>(i);
  throw std::invalid_argument("'" + std::string(s) + "' is not a row class");
}

Affine affine_named(std::string_view s) {
  for (Affine a : {Affine::absent, Affine::identity, Affine::random, Affine::with_zeros})
    if (name(a) == s) return a;
  throw std::invalid_argument("'" + std::string(s) + "' is not gamma/beta's kind (absent, identity, random, with_zeros)");
}

DType dtype_named(std::string_view s) {
  if (const auto d = parse_dtype(s)) return *d;
  throw std::invalid_argument("'" + std::string(s) + "' is not a dtype");
}

double number(std::string_view key, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) throw std::invalid_argument(std::string(key) + "=" + s + ": not a number");
  return d;
}

std::uint64_t whole(std::string_view key, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const unsigned long long u = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end || s[0] == '-') throw std::invalid_argument(std::string(key) + "=" + s + ": not a whole number");
  return u;
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0;;) {
    const std::size_t next = s.find(by, at);
    out.push_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

}  // namespace

CaseSpec parse_case(std::string_view line) {
  std::vector<std::string_view> tokens;
  for (std::string_view t : split(line, ' '))
    if (!t.empty()) tokens.push_back(t);
  if (tokens.size() < 2) throw std::invalid_argument("expected '<dtype> <class>[+<class>...] shape=[...] ...'");
  CaseSpec s;
  s.dtype = dtype_named(tokens[0]);
  for (std::string_view c : split(tokens[1], '+')) s.row_classes.push_back(row_class_named(c));
  bool have_shape = false, have_seed = false;
  std::string dy;
  for (std::size_t i = 2; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    if (t.front() == '(') continue;  // "(rows x cols)", derived from shape and axis
    const std::size_t eq = t.find('=');
    if (eq == std::string_view::npos) throw std::invalid_argument("'" + std::string(t) + "' is not key=value");
    const std::string_view key = t.substr(0, eq), v = t.substr(eq + 1);
    if (key == "kappa") {
      if (v.substr(0, 2) != "1e") throw std::invalid_argument("kappa=" + std::string(v) + ": expected 1e<log10 kappa>");
      s.log10_kappa = number(key, v.substr(2));
    } else if (key == "shape") {
      if (v.size() < 2 || v.front() != '[' || v.back() != ']') throw std::invalid_argument("shape=" + std::string(v) + ": expected [d0,d1,...]");
      for (std::string_view d : split(v.substr(1, v.size() - 2), ',')) s.shape.push_back(static_cast<std::int64_t>(whole(key, d)));
      have_shape = true;
    } else if (key == "axis") {
      s.axis = static_cast<int>(whole(key, v));
    } else if (key == "eps") {
      s.eps = number(key, v);
    } else if (key == "gamma") {
      s.gamma = affine_named(v);
    } else if (key == "beta") {
      s.beta = affine_named(v);
    } else if (key == "misalign") {
      s.misalign = static_cast<int>(whole(key, v));
    } else if (key == "seed") {
      s.data_seed = whole(key, v);
      have_seed = true;
    } else if (key == "op") {
      const auto op = parse_op(v);
      if (!op) throw std::invalid_argument("op=" + std::string(v) + ": not an op");
      s.op = *op;
    } else if (key == "params") {
      s.param_dtype = dtype_named(v);
    } else if (key == "gamma_offset") {
      s.gamma_offset = number(key, v);
    } else if (key == "residual") {
      s.residual_dtype = dtype_named(v);
    } else if (key == "dy") {
      dy = std::string(v);
    } else {
      throw std::invalid_argument("unknown key '" + std::string(key) + "'");
    }
  }
  if (!have_shape || !have_seed) throw std::invalid_argument("shape= and seed= are required");
  if (s.axis < 0 || s.axis > static_cast<int>(s.shape.size())) throw std::invalid_argument("axis out of the shape's range");
  // A backward case's dy sits at its range's edges when its seed says so (dy_range); "dy=" only names it.
  // Where the line names no edge but the seed would draw one, the case came from dy_linearity's profile,
  // which keeps dy at its usual scales.
  if (s.op.direction == Direction::bwd && dy.empty()) {
    s.dy_range_edges = true;
    if (s.describe().find(" dy=") != std::string::npos) s.dy_range_edges = false;
  }
  return s;
}

std::vector<CorpusEntry> load_corpus(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<CorpusEntry> out;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string where = path.filename().string() + ":" + std::to_string(n);
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      const auto space = line.find(' ', first);
      const std::string prop = line.substr(first, space == std::string::npos ? std::string::npos : space - first);
      CorpusEntry e;
      e.where = where;
      const auto p = parse_property(prop);
      if (!p) throw std::runtime_error(where + ": '" + prop + "' is not a property");
      e.property = *p;
      const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
      try {
        e.spec = parse_case(rest);
      } catch (const std::invalid_argument& err) {
        throw std::runtime_error(where + ": " + err.what());
      }
      if (!applies(e.property, e.spec.op))
        throw std::runtime_error(where + ": " + prop + " is not a property of " + std::string(name(e.spec.op)));
      if (e.spec.describe() != rest.substr(rest.find_first_not_of(' ')))
        throw std::runtime_error(where + ": the case reads back as '" + e.spec.describe() + "' (a value lost in the line?)");
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::string replay(const KernelInfo& kernel, const KernelBudget& budget, const CorpusEntry& entry) {
  const PropertyDef def = definition(entry.property, entry.spec.dtype, entry.spec.op);
  Worst worst;
  Case ran;
  const CheckContext ctx{kernel, budget, worst, &ran};
  const Case c = materialize(entry.spec);
  try {
    return def.check(ctx, c);
  } catch (const std::exception& e) {
    return std::string("harness: the kernel threw: ") + e.what();
  }
}

}  // namespace lnorm::verify
