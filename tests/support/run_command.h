// Runs a program (the tpmsec CLI, tpm2-tools) and captures what it printed.
#ifndef TPMSEC_TESTS_SUPPORT_RUN_COMMAND_H_
#define TPMSEC_TESTS_SUPPORT_RUN_COMMAND_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace tpmsec::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] with argv (searched on PATH), with `env` entries ("K=V") added
// to the environment; no shell is involved. Standard input is `input` (from
// an unlinked temporary file), or /dev/null.
CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                          const std::string* input = nullptr);

// Runs the tpmsec CLI built with the tests.
CommandResult run_tpmsec(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                         const std::string* input = nullptr);

// The CLI's exit codes (README): usage, integrity.
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIntegrity = 3;

// "exit N", then stdout and stderr: what a failed expectation prints.
std::string describe(const CommandResult& r);

// Waits (up to 60 s) until process `pid` has a handler for `sig` installed
// (its SigCgt in /proc), so a signal sent then reaches the handler. False
// when the process exited first; its wait status is then in *status.
bool wait_until_it_catches(pid_t pid, int sig, int* status);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_RUN_COMMAND_H_
