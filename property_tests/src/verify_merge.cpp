// `lnorm verify --merge`: the shards of one run (verify --shard K/N --json) joined back into that run.
// A shard's JSON is json_text's; each result carries its cell, the index in the unsharded run's order, so the
// merged outcomes come back in that order and the merged JSON reads as the unsharded run's, cell for cell
// (only the seconds differ, and a worst of ±Inf or NaN, which JSON text holds as null, reads back as NaN).
#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "lnorm/verify_report.hpp"

namespace lnorm::verify {

namespace {

constexpr Status kAllStatuses[] = {Status::pass,        Status::fail,       Status::expected_failure, Status::unexpected_pass,
                                   Status::unconfirmed, Status::mistrusted, Status::skipped};

Status status_named(const std::string& s) {
  for (Status st : kAllStatuses)
    if (name(st) == s) return st;
  throw std::runtime_error("unknown status '" + s + "'");
}

template <class T>
T parsed(const std::optional<T>& v, const std::string& what, const std::string& s) {
  if (!v) throw std::runtime_error("unknown " + what + " '" + s + "'");
  return *v;
}

// JSON text has no Inf or NaN: json_text's null worst reads back as NaN.
std::map<std::string, double> numbers(const nlohmann::json& j) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : j.items()) out[k] = v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
  return out;
}

Outcome outcome_from_json(const nlohmann::json& j) {
  Outcome o;
  o.cell = j.at("cell").get<std::int64_t>();
  o.kernel = j.at("kernel").get<std::string>();
  const std::string op = j.at("op").get<std::string>(), dtype = j.at("dtype").get<std::string>(),
                    property = j.at("property").get<std::string>();
  o.op = parsed(parse_op(op), "op", op);
  o.dtype = parsed(parse_dtype(dtype), "dtype", dtype);
  o.property = parsed(parse_property(property), "property", property);
  o.status = status_named(j.at("status").get<std::string>());
  o.cases = j.at("cases").get<int>();
  o.seconds = j.at("seconds").get<double>();
  o.seed = j.at("seed").get<std::uint64_t>();
  o.worst = numbers(j.at("worst"));
  o.classes = j.at("classes").get<std::map<std::string, int>>();
  o.totals = numbers(j.at("totals"));
  o.correctly_rounded = j.at("correctly_rounded").is_null() ? -1 : j.at("correctly_rounded").get<double>();
  o.message = j.at("message").get<std::string>();
  o.counterexample = j.at("counterexample").get<std::string>();
  o.reproduce = j.at("reproduce").get<std::string>();
  o.expected_reason = j.at("expected_reason").get<std::string>();
  o.dumped = j.at("dumped").get<std::vector<std::string>>();
  o.check_command = j.at("check_command").get<std::string>();
  return o;
}

// "K/N" -> (K, N).
std::pair<int, int> shard_of(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) throw std::runtime_error("shard '" + s + "' is not K/N");
  return {std::stoi(s.substr(0, slash)), std::stoi(s.substr(slash + 1))};
}

// What must agree between the shards of one run.
std::string run_key(const nlohmann::json& j) {
  std::ostringstream k;
  k << "selection " << j.at("selection").get<std::string>() << ", seed " << j.at("seed").get<std::uint64_t>() << ", cases "
    << j.at("cases").get<int>() << (j.at("quick").get<bool>() ? " (quick)" : "") << ", budgets "
    << j.at("budgets").get<std::string>() << ", " << j.at("cells_total").get<std::size_t>() << " cells";
  return k.str();
}

}  // namespace

MergedRun merge_json_shards(const std::vector<std::string>& paths) {
  if (paths.empty()) throw std::runtime_error("--merge: no files");
  MergedRun run;
  std::string key, key_from;
  std::set<int> seen;
  std::set<std::int64_t> cells;
  int shards = 0;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot be read");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
      if (!j.contains("shard") || !j.contains("results")) throw std::runtime_error("no shard or results");
      const std::pair<int, int> shard = shard_of(j.at("shard").get<std::string>());
      const std::string k = run_key(j);
      if (key.empty()) {
        key = k, key_from = path, shards = shard.second;
        run.info.seed = j.at("seed").get<std::uint64_t>();
        run.info.quick = j.at("quick").get<bool>();
        run.info.cases = j.at("cases").get<int>();
        run.info.budgets_source = j.at("budgets").get<std::string>();
        run.info.selection = j.at("selection").get<std::string>();
        run.info.cells_total = j.at("cells_total").get<std::size_t>();
      } else if (k != key || shard.second != shards) {
        throw std::runtime_error("not a shard of the same run as " + key_from + " (" + k + ", shard " +
                                 std::to_string(shard.first) + "/" + std::to_string(shard.second) + "; " + key_from + ": " + key +
                                 ", " + std::to_string(shards) + " shards)");
      }
      if (shard.first < 1 || shard.first > shards) throw std::runtime_error("shard " + std::to_string(shard.first) + " of " + std::to_string(shards));
      if (!seen.insert(shard.first).second)
        throw std::runtime_error("shard " + std::to_string(shard.first) + "/" + std::to_string(shards) + " given twice");
      run.info.seconds += j.at("seconds").get<double>();
      for (const nlohmann::json& r : j.at("results")) {
        Outcome o = outcome_from_json(r);
        if (o.cell < 0 || static_cast<std::size_t>(o.cell) >= run.info.cells_total || o.cell % shards != shard.first - 1)
          throw std::runtime_error("cell " + std::to_string(o.cell) + " does not belong to shard " + std::to_string(shard.first) +
                                   "/" + std::to_string(shards) + " of " + std::to_string(run.info.cells_total) + " cells");
        if (!cells.insert(o.cell).second) throw std::runtime_error("cell " + std::to_string(o.cell) + " twice");
        run.outcomes.push_back(std::move(o));
      }
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ": not a verify --json file (" + e.what() + ")");
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  if (static_cast<int>(seen.size()) != shards) {
    std::string missing;
    for (int k = 1; k <= shards; ++k)
      if (!seen.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(shards);
    throw std::runtime_error("--merge: shard(s) " + missing + " missing (" + std::to_string(seen.size()) + " of " +
                             std::to_string(shards) + " given)");
  }
  if (cells.size() != run.info.cells_total)
    throw std::runtime_error("--merge: the shards hold " + std::to_string(cells.size()) + " cells of the run's " +
                             std::to_string(run.info.cells_total));
  std::sort(run.outcomes.begin(), run.outcomes.end(), [](const Outcome& a, const Outcome& b) { return a.cell < b.cell; });
  run.info.merged_from = shards;
  return run;
}

}  // namespace lnorm::verify
