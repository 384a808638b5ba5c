#include "lnorm/verify_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace lnorm::verify {

namespace {

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// Measures in the order a reader wants them, with short labels.
constexpr std::pair<const char*, const char*> kMeasures[] = {
    {"y_ulp", "y"},
    {"y_budget_used", "of budget"},
    {"mean_ulp", "mean"},
    {"rstd_ulp", "rstd"},
    {"invariance_ulp", "LN(ax+c)-LN(x)"},
    {"scale_invariance_ulp", "RMS(ax)-RMS(x)"},
    {"oddness_ulp", "RMS(-x)+RMS(x)"},
    {"ms_y_over_tolerance", "mean(y^2)/tol"},
    {"permutation_ulp", "perm diff"},
    {"mean_y_over_tolerance", "mean(y)/tol"},
    {"var_y_over_tolerance", "var(y)/tol"},
};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

}  // namespace

std::string worst_text(const Outcome& o) {
  std::string out;
  for (const auto& [key, label] : kMeasures) {
    const auto it = o.worst.find(key);
    if (it == o.worst.end()) continue;
    if (!out.empty()) out += ", ";
    if (std::string(key) == "y_budget_used") out += short_num(100 * it->second) + "% " + label;
    else out += std::string(label) + " " + short_num(it->second);
  }
  if (o.correctly_rounded >= 0 && o.property == Property::accuracy) {
    char cr[48];
    std::snprintf(cr, sizeof cr, "%s%.4g%% correctly rounded", out.empty() ? "" : ", ", 100 * o.correctly_rounded);
    out += cr;
  }
  return out.empty() ? "-" : out;
}

std::string table_text(const std::vector<Outcome>& outcomes, const RunInfo& info) {
  std::ostringstream s;
  char line[512];
  // The kernel column: 10 wide, wider for a longer (plugin) name.
  std::size_t width = 10;
  bool ops = false;  // an op column only when some outcome is not LayerNorm's (LayerNorm-only runs read as before)
  for (const Outcome& o : outcomes) width = std::max(width, o.kernel.size()), ops = ops || o.op != Op::layernorm;
  const int w = static_cast<int>(width);
  const auto op_cell = [&](const std::string& text) { return ops ? text + std::string(text.size() < 10 ? 10 - text.size() : 0, ' ') : std::string(); };
  std::snprintf(line, sizeof line, "%-*s %s%-5s %-17s %-10s %6s  %s\n", w, "kernel", op_cell("op").c_str(), "dtype", "property",
                "status", "cases", "worst seen (scaled ulps unless a ratio)");
  s << line;
  int failures = 0, xfails = 0, skipped = 0, passes = 0, unconfirmed = 0;
  for (const Outcome& o : outcomes) {
    std::snprintf(line, sizeof line, "%-*s %s%-5s %-17s %-10s %6d  %s\n", w, o.kernel.c_str(), op_cell(std::string(name(o.op))).c_str(),
                  std::string(name(o.dtype)).c_str(), std::string(name(o.property)).c_str(), std::string(name(o.status)).c_str(),
                  o.cases, o.status == Status::skipped ? o.message.c_str() : worst_text(o).c_str());
    s << line;
    if (is_failure(o.status)) ++failures;
    else if (o.status == Status::expected_failure) ++xfails;
    else if (o.status == Status::skipped) ++skipped;
    else if (o.status == Status::unconfirmed) ++unconfirmed;
    else ++passes;
  }
  for (const Outcome& o : outcomes) {
    if (!is_failure(o.status) && o.status != Status::expected_failure && o.status != Status::unconfirmed) continue;
    s << "\n" << name(o.status) << ": " << o.kernel << " " << (o.op == Op::layernorm ? "" : std::string(name(o.op)) + " ")
      << name(o.dtype) << " " << name(o.property) << " — " << summary(o.property, o.op) << "\n";
    if (o.status == Status::expected_failure) s << "  expected: " << o.expected_reason << "\n";
    s << "  " << o.message << "\n";
    if (!o.counterexample.empty()) s << "  shrunk case: " << o.counterexample << "\n";
    s << "  reproduce: " << o.reproduce << "\n";
    for (const std::string& f : o.dumped) s << "  wrote " << f << "\n";
    if (!o.check_command.empty()) s << "  check it: " << o.check_command << "\n";
  }
  // Input classes actually generated (benchdnn's "mistrusted" check fails a property whose run missed
  // one): the whole run's counts here, each property's in --json.
  std::map<std::string, long> classes;
  for (const Outcome& o : outcomes) {
    for (const auto& [cls, n] : o.classes) classes[cls] += n;
  }
  if (!classes.empty()) {
    s << "\ninput classes generated (cases, all properties):";
    for (const auto& [cls, n] : classes) s << " " << cls << " " << n;
    s << "\n";
  }
  std::snprintf(line, sizeof line,
                "\n%s: %d passed, %d failed, %d expected failures (%d not seen in this run), %d skipped (seed %llu, %s, budgets: %s, %.1f s)\n",
                // A run that verified nothing (every kernel unavailable here, e.g. CUDA without a device) must not
                // read as a pass: verified_nothing, and exit 1.
                failures ? "FAIL" : verified_nothing(outcomes) ? "NOTHING VERIFIED" : "PASS", passes, failures, xfails + unconfirmed, unconfirmed, skipped, static_cast<unsigned long long>(info.seed),
                info.quick ? "quick" : "full", info.budgets_source.c_str(), info.seconds);
  s << line;
  if (info.shards > 1)
    s << "(shard " << info.shard << "/" << info.shards << ": " << outcomes.size() << " of the run's " << info.cells_total
      << " cells; lnorm verify --merge joins the shards' --json files into its verdict)\n";
  if (info.merged_from > 0) s << "(merged from " << info.merged_from << " shards: " << outcomes.size() << " cells)\n";
  return s.str();
}

std::string json_text(const std::vector<Outcome>& outcomes, const RunInfo& info) {
  nlohmann::json results = nlohmann::json::array();
  bool pass = true;
  for (const Outcome& o : outcomes) {
    pass = pass && !is_failure(o.status);
    results.push_back({{"cell", o.cell},
                       {"kernel", o.kernel},
                       {"op", name(o.op)},
                       {"dtype", name(o.dtype)},
                       {"property", name(o.property)},
                       {"status", name(o.status)},
                       {"failed", is_failure(o.status)},
                       {"cases", o.cases},
                       {"seconds", o.seconds},
                       {"seed", o.seed},
                       {"worst", o.worst},
                       {"classes", o.classes},
                       {"totals", o.totals},
                       {"correctly_rounded", o.correctly_rounded >= 0 ? nlohmann::json(o.correctly_rounded) : nlohmann::json(nullptr)},
                       {"message", o.message},
                       {"counterexample", o.counterexample},
                       {"reproduce", o.reproduce},
                       {"expected_reason", o.expected_reason},
                       {"dumped", o.dumped},
                       {"check_command", o.check_command}});
  }
  nlohmann::json out = {{"pass", pass},     {"seed", info.seed},     {"quick", info.quick},
                        {"cases", info.cases}, {"budgets", info.budgets_source}, {"seconds", info.seconds},
                        {"selection", info.selection},
                        {"shard", std::to_string(info.shard) + "/" + std::to_string(info.shards)},
                        {"cells_total", info.cells_total}};
  if (info.merged_from > 0) out["merged_from"] = info.merged_from;
  out["results"] = results;
  return out.dump(2) + "\n";
}

std::string junit_text(const std::vector<Outcome>& outcomes, const RunInfo& info) {
  int failures = 0, skipped = 0;
  for (const Outcome& o : outcomes) {
    if (is_failure(o.status)) ++failures;
    else if (o.status == Status::skipped || o.status == Status::expected_failure || o.status == Status::unconfirmed) ++skipped;
  }
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s << "<testsuites name=\"lnorm verify\" tests=\"" << outcomes.size() << "\" failures=\"" << failures << "\" time=\""
    << info.seconds << "\">\n";
  s << "  <testsuite name=\"lnorm.verify\" tests=\"" << outcomes.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << info.seconds << "\">\n";
  s << "    <properties><property name=\"seed\" value=\"" << info.seed << "\"/><property name=\"budgets\" value=\""
    << xml_escape(info.budgets_source) << "\"/></properties>\n";
  for (const Outcome& o : outcomes) {
    s << "    <testcase classname=\"lnorm.verify." << xml_escape(o.kernel) << "."
      << (o.op == Op::layernorm ? "" : std::string(name(o.op)) + ".") << name(o.dtype) << "\" name=\""
      << name(o.property) << "\" time=\"" << o.seconds << "\">";
    const std::string detail = o.message + (o.counterexample.empty() ? "" : "\nshrunk case: " + o.counterexample) +
                               "\nreproduce: " + o.reproduce + "\nworst: " + worst_text(o);
    if (is_failure(o.status)) {
      s << "\n      <failure type=\"" << name(o.status) << "\" message=\"" << xml_escape(o.message) << "\">"
        << xml_escape(detail) << "</failure>\n    ";
    } else if (o.status == Status::skipped) {
      s << "<skipped message=\"" << xml_escape("unavailable: " + o.message) << "\"/>";
    } else if (o.status == Status::expected_failure || o.status == Status::unconfirmed) {
      s << "<skipped message=\"" << xml_escape(std::string(o.status == Status::unconfirmed ? "expected failure (not seen in this quick run): " : "expected failure: ") + o.expected_reason) << "\"/>";
    } else {
      s << "<system-out>" << xml_escape(std::to_string(o.cases) + " cases; worst: " + worst_text(o)) << "</system-out>";
    }
    s << "</testcase>\n";
  }
  s << "  </testsuite>\n</testsuites>\n";
  return s.str();
}

}  // namespace lnorm::verify
