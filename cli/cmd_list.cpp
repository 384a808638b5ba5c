#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "lnorm/registry.hpp"

namespace lnorm::cli {

void add_list(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("list", "List the kernels, their dtypes and whether they run here");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([json, &exit_code] {
    nlohmann::json out = nlohmann::json::array();
    if (!*json) std::printf("%-10s %-18s %-10s %s\n", "kernel", "dtypes", "available", "summary");
    for (const KernelInfo& k : registry()) {
      std::string dtypes;
      nlohmann::json per_dtype = nlohmann::json::object();
      std::optional<std::string> reason;
      for (DType d : kAllDTypes) {
        if (!k.dtypes.contains(d)) continue;
        dtypes += (dtypes.empty() ? "" : ",") + std::string(name(d));
        const auto why = unavailable_reason(k, make_problem(1, 1024, d, 1e-5, false, false));
        per_dtype[std::string(name(d))] = why ? nlohmann::json(*why) : nlohmann::json(nullptr);
        if (why && !reason) reason = why;
      }
      if (*json) {
        out.push_back({{"name", k.name}, {"summary", k.summary}, {"dtypes", per_dtype},
                       {"available", !reason.has_value()}, {"cautionary", k.cautionary},
                       {"unavailable_reason", reason ? nlohmann::json(*reason) : nlohmann::json(nullptr)}});
      } else {
        std::printf("%-10s %-18s %-10s %s%s\n", std::string(k.name).c_str(), dtypes.c_str(),
                    reason ? "no" : "yes", std::string(k.summary).c_str(),
                    reason ? (" [" + *reason + "]").c_str() : "");
      }
    }
    if (*json) std::printf("%s\n", out.dump(2).c_str());
    exit_code = 0;
  });
}

}  // namespace lnorm::cli
