// budgets.toml → KernelBudget. Strict: an unknown key, a missing reason or a negative budget is an
// error naming the key, because a typo in a budget file silently loosens a CI gate.
#include "lnorm/budgets.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

namespace lnorm::verify {

extern const char* const kBuiltinBudgetsToml;  // generated from budgets.toml at build time

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw BudgetError(source + ": " + key + ": " + what);
}

void only_keys(const toml::table& t, const std::set<std::string>& allowed, const std::string& source,
               const std::string& where) {
  for (const auto& [k, v] : t) {
    (void)v;
    if (!allowed.count(std::string(k.str()))) fail(source, where + "." + std::string(k.str()), "unknown key");
  }
}

const toml::table& table_at(const toml::table& t, const std::string& key, const std::string& source,
                            const std::string& where) {
  const toml::table* sub = t[key].as_table();
  if (!sub) fail(source, where + "." + key, "missing (expected a table with a reason)");
  return *sub;
}

double number_at(const toml::table& t, const std::string& key, const std::string& source, const std::string& where) {
  const std::optional<double> v = t[key].value<double>();
  if (!v) fail(source, where + "." + key, "missing or not a number");
  if (!(*v >= 0)) fail(source, where + "." + key, "must be >= 0");
  return *v;
}

std::string reason_at(const toml::table& t, const std::string& source, const std::string& where) {
  const std::optional<std::string> r = t["reason"].value<std::string>();
  if (!r || r->empty()) fail(source, where + ".reason", "every budget needs a one-line reason");
  return *r;
}

// A numeric budget's basis (optional in a user's file; the built-in file gives one for every entry, and
// test_properties holds it to that): "bound" (the algorithm's proven error bound), "measured" (the worst over
// many seeds, with a margin the reason states) or "policy" (a general budget a kernel is held to: the defaults,
// and the textbook kernels measured against what a careful kernel achieves).
std::string basis_at(const toml::table& t, const std::string& source, const std::string& where) {
  if (!t.contains("basis")) return "";
  const std::optional<std::string> v = t["basis"].value<std::string>();
  if (!v || (*v != "bound" && *v != "measured" && *v != "policy"))
    fail(source, where + ".basis", "expected \"bound\", \"measured\" or \"policy\"");
  return *v;
}

bool bool_at(const toml::table& t, const std::string& key, const std::string& source, const std::string& where,
             std::string& reason) {
  const toml::table& v = table_at(t, key, source, where);
  only_keys(v, {"value", "reason"}, source, where + "." + key);
  const std::optional<bool> b = v["value"].value<bool>();
  if (!b) fail(source, where + "." + key + ".value", "missing or not a boolean");
  reason = reason_at(v, source, where + "." + key);
  return *b;
}

// A backward section: dx, dgamma (a + b·kappa), dbeta (ulp), expected_failures.
void parse_backward(const toml::table& t, const std::string& source, const std::string& where, KernelBudget& b) {
  only_keys(t, {"dx", "dgamma", "dbeta", "expected_failures"}, source, where);
  for (auto [key, budget, reason] : {std::tuple{"dx", &b.dx, &b.dx_reason}, std::tuple{"dgamma", &b.dgamma, &b.dgamma_reason}}) {
    const toml::table& e = table_at(t, key, source, where);
    only_keys(e, {"a", "b", "reason", "basis"}, source, where + "." + key);
    *budget = Budget{number_at(e, "a", source, where + "." + key), number_at(e, "b", source, where + "." + key)};
    *reason = reason_at(e, source, where + "." + key);
    b.basis[key] = basis_at(e, source, where + "." + key);
  }
  const toml::table& db = table_at(t, "dbeta", source, where);
  only_keys(db, {"ulp", "reason", "basis"}, source, where + ".dbeta");
  b.dbeta_ulp = number_at(db, "ulp", source, where + ".dbeta");
  b.dbeta_reason = reason_at(db, source, where + ".dbeta");
  b.basis["dbeta"] = basis_at(db, source, where + ".dbeta");
}

void parse_expected_failures(const toml::table& t, const std::string& source, const std::string& where, Op op, KernelBudget& b);

KernelBudget parse_section(const toml::table& t, const std::string& source, const std::string& where, Op op) {
  if (op.direction == Direction::bwd) {
    KernelBudget b;
    b.section = where;
    b.op = op;
    parse_backward(t, source, where, b);
    parse_expected_failures(t, source, where, op, b);
    return b;
  }
  // LayerNorm has a mean (and exact-statistics rows); RMSNorm has none, and a sign-symmetry claim.
  if (op.norm == Norm::layernorm) only_keys(t, {"y", "mean", "rstd", "exact_mean", "correctly_rounded", "expected_failures"}, source, where);
  else only_keys(t, {"y", "rstd", "sign_symmetric", "correctly_rounded", "expected_failures"}, source, where);
  KernelBudget b;
  b.section = where;
  b.op = op;
  const toml::table& y = table_at(t, "y", source, where);
  only_keys(y, {"a", "b", "reason", "basis"}, source, where + ".y");
  b.y = Budget{number_at(y, "a", source, where + ".y"), number_at(y, "b", source, where + ".y")};
  b.y_reason = reason_at(y, source, where + ".y");
  b.basis["y"] = basis_at(y, source, where + ".y");
  if (op.norm == Norm::layernorm) {
    const toml::table& mean = table_at(t, "mean", source, where);
    only_keys(mean, {"ulp", "reason", "basis"}, source, where + ".mean");
    b.mean_ulp = number_at(mean, "ulp", source, where + ".mean");
    b.mean_reason = reason_at(mean, source, where + ".mean");
    b.basis["mean"] = basis_at(mean, source, where + ".mean");
  }
  const toml::table& rstd = table_at(t, "rstd", source, where);
  only_keys(rstd, {"ulp", "reason", "basis"}, source, where + ".rstd");
  b.rstd_ulp = number_at(rstd, "ulp", source, where + ".rstd");
  b.rstd_reason = reason_at(rstd, source, where + ".rstd");
  b.basis["rstd"] = basis_at(rstd, source, where + ".rstd");
  if (op.norm == Norm::layernorm) b.exact_mean = bool_at(t, "exact_mean", source, where, b.exact_mean_reason);
  else b.sign_symmetric = bool_at(t, "sign_symmetric", source, where, b.sign_symmetric_reason);
  if (t.contains("correctly_rounded")) {
    const toml::table& cr = table_at(t, "correctly_rounded", source, where);
    only_keys(cr, {"min", "reason", "basis"}, source, where + ".correctly_rounded");
    b.min_correctly_rounded = number_at(cr, "min", source, where + ".correctly_rounded");
    if (b.min_correctly_rounded > 1) fail(source, where + ".correctly_rounded.min", "a fraction: at most 1");
    b.correctly_rounded_reason = reason_at(cr, source, where + ".correctly_rounded");
    b.basis["correctly_rounded"] = basis_at(cr, source, where + ".correctly_rounded");
  }
  parse_expected_failures(t, source, where, op, b);
  return b;
}

void parse_expected_failures(const toml::table& t, const std::string& source, const std::string& where, Op op, KernelBudget& b) {
  if (const toml::table* xf = t["expected_failures"].as_table()) {
    for (const auto& [k, v] : *xf) {
      const std::string key = where + ".expected_failures." + std::string(k.str());
      const std::optional<Property> p = parse_property(k.str());
      if (!p) fail(source, key, "not a property name");
      // A norm's section also speaks for its Add & Norm form (which falls back to it): add_* properties.
      if (!applies(*p, op) && !applies(*p, Op{.norm = op.norm, .prologue = Prologue::residual_add})) fail(source, key, "not a property of " + std::string(name(op)));
      // "reason" (strict), or { reason = "...", strict = false } (may hold on some seeds).
      std::optional<std::string> reason = v.value<std::string>();
      if (const toml::table* entry = v.as_table()) {
        only_keys(*entry, {"reason", "strict"}, source, key);
        reason = reason_at(*entry, source, key);
        const std::optional<bool> strict = (*entry)["strict"].value<bool>();
        if (!strict) fail(source, key + ".strict", "missing or not a boolean");
        if (!*strict) b.non_strict_failures.insert(*p);
      }
      if (!reason || reason->empty()) fail(source, key, "needs the reason as a string, or { reason = \"...\", strict = false }");
      b.expected_failures[*p] = *reason;
    }
  }
}

}  // namespace

Budgets Budgets::parse(std::string_view toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    throw BudgetError(msg.str());
  }
  Budgets out;
  out.source_ = source;
  // [kernel.dtype] (LayerNorm), or [op.kernel.dtype]: a top-level key that names an op is that op's level.
  const auto read_kernel = [&](const std::string& kname, const toml::node& node, Op op, const std::string& prefix) {
    const toml::table* per_dtype = node.as_table();
    if (!per_dtype) fail(source, prefix + kname, "expected a table of dtypes");
    for (const auto& [dt, section] : *per_dtype) {
      const std::string where = prefix + kname + "." + std::string(dt.str());
      const std::optional<DType> d = parse_dtype(dt.str());
      if (!d) fail(source, where, "not a dtype (f32, f64, f16, bf16)");
      const toml::table* st = section.as_table();
      if (!st) fail(source, where, "expected a table");
      if (out.table_.count({op, kname, *d}))
        fail(source, where, "given twice (as [" + kname + "." + std::string(dt.str()) + "] and [layernorm." + kname + "." +
                                std::string(dt.str()) + "])");
      out.table_[{op, kname, *d}] = parse_section(*st, source, where, op);
    }
  };
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    if (const std::optional<Op> op = parse_op(k)) {
      const toml::table* kernels = node.as_table();
      if (!kernels) fail(source, k, "expected a table of kernels");
      for (const auto& [kernel, knode] : *kernels) read_kernel(std::string(kernel.str()), knode, *op, k + ".");
    } else {
      read_kernel(k, node, Op::layernorm, "");
    }
  }
  return out;
}

Budgets Budgets::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BudgetError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Budgets Budgets::builtin() { return parse(kBuiltinBudgetsToml, "budgets.toml (built in)"); }

bool Budgets::has_own(Op op, std::string_view kernel, DType dtype) const {
  return table_.count({op, std::string(kernel), dtype}) != 0;
}

bool Budgets::covers(Op op) const {
  for (const auto& entry : table_)
    if (std::get<0>(entry.first) == op) return true;
  return op.prologue == Prologue::residual_add && covers(plain(op.norm));
}

const KernelBudget& Budgets::for_kernel(Op op, std::string_view kernel, DType dtype) const {
  auto it = table_.find({op, std::string(kernel), dtype});
  if (it == table_.end()) it = table_.find({op, "default", dtype});
  // Add & Norm without sections of its own is held to its norm's: y, mean and rstd are the norm's of h.
  if (it == table_.end() && op.prologue == Prologue::residual_add) return for_kernel(plain(op.norm), kernel, dtype);
  if (it == table_.end()) {
    const std::string level = op == Op::layernorm ? "" : std::string(name(op)) + ".";
    throw BudgetError(source_ + ": no [" + level + std::string(kernel) + "." + std::string(name(dtype)) + "] and no [" +
                      level + "default." + std::string(name(dtype)) + "] section");
  }
  return it->second;
}

std::vector<const KernelBudget*> Budgets::sections() const {
  std::vector<const KernelBudget*> out;
  for (const auto& [key, b] : table_) out.push_back(&b);
  return out;
}

}  // namespace lnorm::verify
