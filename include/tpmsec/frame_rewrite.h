// What an intermediary changes in a frame it passes on, written in one
// place: a handle of a command's or a response's handle area (a resource
// manager's virtual handles for the TPM's, and back) and FlushContext's
// flushHandle (a parameter, Part 3 §28.4). Each checks the frame's header
// and that the field lies within the frame before a byte is written, so no
// caller patches a frame at an offset of its own. Reading a frame off a
// stream, the other thing every intermediary does with raw bytes, is
// read_stream_frame() (frame_header.h).
#ifndef TPMSEC_FRAME_REWRITE_H_
#define TPMSEC_FRAME_REWRITE_H_

#include <cstddef>
#include <cstdint>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

// Handle `index` of the handle area of `frame` (a whole command or response,
// its size as its header says) becomes `handle`. kUsage, nothing written,
// when the header does not frame it or the handle area could not hold it;
// the caller read the area first (read_command_areas, read_response_handles),
// so the handle is one it knows is there.
Status rewrite_handle(MutableByteView frame, size_t index, uint32_t handle);

// FlushContext's flushHandle in `command` (a whole FlushContext command)
// becomes `handle`. kUsage, nothing written, for any other frame.
Status rewrite_flush_handle(MutableByteView command, uint32_t handle);

}  // namespace tpmsec

#endif  // TPMSEC_FRAME_REWRITE_H_
