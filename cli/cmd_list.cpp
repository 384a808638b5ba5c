#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "plugins.hpp"
#include "lnorm/registry.hpp"

namespace lnorm::cli {

void add_list(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("list", "List the kernels, their dtypes, whether they run here, the ops they implement and "
                                         "whether they write quantized outputs (--quant)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("--verbose", *verbose,
                "Also say what lies behind an unavailable kernel's reason (the CUDA runtime's call and error code)");
  add_plugin_flag(cmd);
  cmd->callback([json, verbose, &exit_code] {
    nlohmann::json out = nlohmann::json::array();
    // The name column: 10 wide, wider for a longer (plugin) name.
    std::size_t width = 10;
    for (const KernelInfo& k : registry()) width = std::max(width, k.name.size());
    const int w = static_cast<int>(width);
    // The ops column: as wide as the longest list (every op: 43 characters).
    std::size_t ops_width = 18;
    for (const KernelInfo& k : registry()) {
      std::size_t len = 0;
      for (Op o : kAllOps)
        if (k.implements(o)) len += name(o).size() + (len ? 1 : 0);
      ops_width = std::max(ops_width, len);
    }
    const int ow = static_cast<int>(ops_width);
    // The quantized column: the table's format families, from its rows (fp8, int8, fp4): a new row's family appears.
    std::string families;
    for (const FormatInfo& f : kFormatTable) {
      const std::string fam = (is_float(f.format) ? "fp" : "int") + std::to_string(f.bits);
      if (("," + families + ",").find("," + fam + ",") == std::string::npos) families += (families.empty() ? "" : ",") + fam;
    }
    const int qw = static_cast<int>(std::max<std::size_t>(9, families.size()));
    if (!*json) std::printf("%-*s %-18s %-10s %-*s %-*s %s\n", w, "kernel", "dtypes", "available", ow, "ops", qw, "quantized", "summary");
    for (const KernelInfo& k : registry()) {
      std::string ops_text;
      nlohmann::json ops = nlohmann::json::array();
      Op first = Op::layernorm;
      for (Op o : kAllOps) {
        if (!k.implements(o)) continue;
        if (ops.empty()) first = o;
        ops.push_back(std::string(name(o)));
        ops_text += (ops_text.empty() ? "" : ",") + std::string(name(o));
      }
      std::string dtypes;
      nlohmann::json per_dtype = nlohmann::json::object();
      std::optional<std::string> reason;
      for (DType d : kAllDTypes) {
        if (!k.takes.dtypes.contains(d)) continue;
        dtypes += (dtypes.empty() ? "" : ",") + std::string(name(d));
        const auto why = unavailable_reason(k, with_op(make_problem(1, 1024, d, 1e-5, false, false), first));
        per_dtype[std::string(name(d))] = why ? nlohmann::json(*why) : nlohmann::json(nullptr);
        if (why && !reason) reason = why;
      }
      // The quantized epilogue (lnorm/quant.hpp): every format and scaling, on each forward op it implements.
      const bool quant = k.takes.epilogues.contains(Epilogue::quantized);

      nlohmann::json quantized = nullptr;
      if (quant) {  // from the part tables, so an appended format or scaling is listed
        quantized = {{"formats", nlohmann::json::array()}, {"scalings", nlohmann::json::array()}};
        for (const FormatInfo& f : kFormatTable) quantized["formats"].push_back(f.name);
        for (const ScalingInfo& s : kScalingTable) quantized["scalings"].push_back(s.syntax);
      }
      const std::string detail = reason && *verbose && k.why_not_detail ? k.why_not_detail() : std::string();
      if (*json) {
        out.push_back({{"name", k.name}, {"summary", k.summary}, {"dtypes", per_dtype}, {"ops", ops}, {"quantized", quantized},
                       {"available", !reason.has_value()}, {"cautionary", k.cautionary},
                       {"plugin", plugin_path_of(k) ? nlohmann::json(*plugin_path_of(k)) : nlohmann::json(nullptr)},
                       {"unavailable_reason", reason ? nlohmann::json(*reason) : nlohmann::json(nullptr)}});
        if (!detail.empty()) out.back()["unavailable_detail"] = detail;
      } else {
        std::printf("%-*s %-18s %-10s %-*s %-*s %s%s\n", w, std::string(k.name).c_str(), dtypes.c_str(),
                    reason ? "no" : "yes", ow, ops_text.c_str(), qw, quant ? families.c_str() : "-", std::string(k.summary).c_str(),
                    reason ? (" [" + *reason + "]").c_str() : "");
        if (!detail.empty()) std::printf("%-*s   %s\n", w, "", detail.c_str());
      }
    }
    if (*json) std::printf("%s\n", out.dump(2).c_str());
    exit_code = 0;
  });
}

}  // namespace lnorm::cli
