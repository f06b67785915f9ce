// INTERIM: the command table's lookup, until main's find_command() covers
// every Part 3 command (branch cmdtable). Same signature; this file goes
// when that lands.
#ifndef TPMSEC_SRC_WRAP_FIND_COMMAND_INTERIM_H_
#define TPMSEC_SRC_WRAP_FIND_COMMAND_INTERIM_H_

#include <cstdint>

#include "tpmsec/command.h"

namespace tpmsec {

// The attributes of `code` (Part 3), or nullptr for a code the table lacks.
const CommandInfo* find_command(uint32_t code);

}  // namespace tpmsec

#endif  // TPMSEC_SRC_WRAP_FIND_COMMAND_INTERIM_H_
