// --allow-detection and --allow-plain: the least protection a command that
// decides a strategy (policy calibrate, policy derive, bench) may choose.
#ifndef TPMSEC_SRC_CLI_FLOOR_FLAGS_H_
#define TPMSEC_SRC_CLI_FLOOR_FLAGS_H_

#include <CLI/CLI.hpp>

#include "tpmsec/strategy_choice.h"

namespace tpmsec::cli {

struct FloorFlags {
  bool allow_detection = false;
  bool allow_plain = false;
  void add_to(CLI::App* sub) {
    sub->add_flag("--allow-detection", allow_detection,
                  "Allow checkpoint (detects, does not prevent) when prevention is over budget: for a policy file of "
                  "your own, not the shipped one");
    sub->add_flag("--allow-plain", allow_plain,
                  "Allow plain and checkpoint when prevention is over budget (plain protects nothing): for a policy "
                  "file of your own");
  }
  ProtectionFloor floor() const {
    if (allow_plain) return ProtectionFloor::kNone;
    return allow_detection ? ProtectionFloor::kDetection : ProtectionFloor::kPrevention;
  }
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_FLOOR_FLAGS_H_
