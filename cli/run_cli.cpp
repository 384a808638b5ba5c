// lnorm — how exact and how fast is a LayerNorm kernel? (DESIGN.md "CLI contract")
// Exit codes: 0 ok / within budget, 1 over budget, a property failed or a plugin failed, 2 bad input or usage,
// 3 internal error. A function rather than main() so the fuzz target (fuzz/cli_fuzz.cpp) can call it.
#include "lnorm/run_cli.hpp"

#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "crash_guard.hpp"
#include "inputs.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/operand_streams.hpp"

namespace lnorm::cli {

int run_cli(int argc, char** argv) {
  CLI::App app{"lnorm: exact-reference accuracy and speed of LayerNorm kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lnorm 0.1.0");
  int exit_code = 0;
  lnorm::cli::add_list(app, exit_code);
  lnorm::cli::add_run(app, exit_code);
  lnorm::cli::add_reference(app, exit_code);
  lnorm::cli::add_check(app, exit_code);
  lnorm::cli::add_gen(app, exit_code);
  lnorm::cli::add_verify(app, exit_code);
  lnorm::cli::add_bench(app, exit_code);
  lnorm::cli::add_select(app, exit_code);
  lnorm::cli::add_report(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lnorm: %s\n", e.what());
    return 2;
  } catch (const lnorm::cli::InputError& e) {
    std::fprintf(stderr, "lnorm: %s\n", e.what());
    return 2;
  } catch (const lnorm::io::NpyError& e) {
    std::fprintf(stderr, "lnorm: %s\n", e.what());
    return 2;
  } catch (const lnorm::cli::PluginFailure& e) {
    std::fprintf(stderr, "lnorm: %s\n", e.what());
    return 1;
  } catch (const lnorm::OperandOverrun& e) {
    // Found after the kernel's call returned (lnorm/operand_streams.hpp): a plugin's fault if one ran, else lnorm's.
    const std::string plugin = lnorm::cli::last_plugin_code();
    if (plugin.empty()) {
      std::fprintf(stderr, "lnorm: internal error: a kernel %s\n", e.what());
      return 3;
    }
    std::fprintf(stderr, "lnorm: plugin kernel %s %s; no output was written\n", plugin.c_str(), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "lnorm: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lnorm: internal error: %s\n", e.what());
    return 3;
  }
  return exit_code;
}

}  // namespace lnorm::cli
