// The lnorm subcommands. Each add_* registers one subcommand on the app; when it runs, it stores
// its exit code in `exit_code` (0 ok, 1 over budget / failed) or throws InputError (exit 2).
#pragma once

#include <CLI/CLI.hpp>

namespace lnorm::cli {

void add_list(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);        // run --kernel K
void add_reference(CLI::App& app, int& exit_code);  // the exact reference, same flags as run
void add_check(CLI::App& app, int& exit_code);
void add_gen(CLI::App& app, int& exit_code);        // generates test inputs (.npy)
void add_verify(CLI::App& app, int& exit_code);     // the property suite against budgets.toml
void add_bench(CLI::App& app, int& exit_code);      // throughput beside memcpy and oneDNN
void add_select(CLI::App& app, int& exit_code);     // the fastest kernel within an accuracy budget
void add_report(CLI::App& app, int& exit_code);     // precision report: JSON, Markdown, HTML, plots

}  // namespace lnorm::cli
