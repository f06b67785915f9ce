// What tpmsec policy's subcommands share (policy_command.cc: show, check;
// policy_calibrate_command.cc: calibrate, derive).
#ifndef TPMSEC_SRC_CLI_POLICY_COMMAND_H_
#define TPMSEC_SRC_CLI_POLICY_COMMAND_H_

#include <string>
#include <string_view>

#include "cli.h"
#include "tpmsec/policy/policy.h"

namespace tpmsec::cli {

// "manufacturer vendor firmware" of a TPM's facts.
std::string identity_line(const TpmFacts& f);
// How a rule below prevention takes effect, for those who paste or check one.
extern const std::string_view kWhenLowering;

void register_calibrate(CLI::App* policy, Action* action);
void register_derive(CLI::App* policy, Action* action);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_POLICY_COMMAND_H_
