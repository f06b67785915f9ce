#include "support/handle_listing.h"

#include "tpmsec/commands.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {

bool is_handle_listing(ByteView command) {
  // header (10) || capability || property || propertyCount, no sessions.
  return command.size() == 22 && load_be32(command.data() + 6) == cc::kGetCapability &&
         load_be32(command.data() + 10) == cap::kHandles;
}

Bytes empty_handle_listing() {
  Writer w;
  w.u16(st::kNoSessions);
  w.u32(19);
  w.u32(rc::kSuccess);
  w.u8(0);  // moreData
  w.u32(cap::kHandles);
  w.u32(0);  // count
  return *w.finish();
}

}  // namespace tpmsec::testing
