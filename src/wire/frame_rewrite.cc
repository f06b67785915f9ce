#include "tpmsec/frame_rewrite.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/wire.h"

namespace tpmsec {

Status rewrite_handle(MutableByteView frame, size_t index, uint32_t handle) {
  HeaderRead h = read_frame_header(frame, frame.size());
  const size_t at = kFrameHeaderBytes + 4 * index;
  if (h.check != FrameCheck::kOk || h.header.size != frame.size() || at + 4 > frame.size()) {
    return usage_error(fmt::format("a frame of {} bytes has no handle {} to rewrite", frame.size(), index));
  }
  store_be32(frame.data() + at, handle);
  return ok_status();
}

Status rewrite_flush_handle(MutableByteView command, uint32_t handle) {
  auto areas = read_command_areas(command, command.size());
  if (!areas.ok() || areas->info->code != cc::kFlushContext || areas->parameters.size() < 4) {
    return usage_error("not a FlushContext command whose flushHandle could be rewritten");
  }
  const size_t at = static_cast<size_t>(areas->parameters.data() - command.data());
  store_be32(command.data() + at, handle);
  return ok_status();
}

}  // namespace tpmsec
