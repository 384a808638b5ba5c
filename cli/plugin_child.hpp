// Commands that load plugins run in a forked child: everything but `verify`, whose plugin kernels already run in
// children of their own (verify_sandbox.hpp). Whatever a plugin does to the process it is loaded into (a crash while
// it loads, a wild write that brings lnorm down after its call returned, a hang the user interrupts) then ends the
// command with exit 1 and one line naming the plugin code that ran last, and no output: the child's handlers remove
// the temporaries in flight, and the outputs are renamed into place only at the end (OutputFiles::commit).
#pragma once

#include <optional>

namespace lnorm::cli {

// In the parent: the command's exit status for main() (the child's own, or 1 for a crash; a child ended by SIGINT,
// SIGTERM or SIGHUP ends the parent by the same signal). In the child, and where the command loads no plugin:
// nullopt, go on with the command.
std::optional<int> run_plugins_in_child(int argc, char** argv);

}  // namespace lnorm::cli
