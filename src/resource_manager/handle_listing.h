// GetCapability(TPM_CAP_HANDLES) answered from a client's handle space
// (tpm2-abrmd's get_cap_gen_response; the kernel filters the TPM's list in
// tpm2_map_response_body): a client lists its own transient objects (by
// their virtual handles) and sessions, never another's or the server's.
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_HANDLE_LISTING_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_HANDLE_LISTING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tpmsec/bytes.h"

namespace tpmsec::server {

struct SpaceListing {
  std::vector<uint32_t> objects;          // virtual handles
  std::vector<uint32_t> loaded_sessions;  // as the client sees them: loaded between its commands
  std::vector<uint32_t> saved_sessions;   // saved by the client itself
};

// For GetCapability's `parameters`: the answer when it asks for transient
// objects, loaded or saved sessions (`space` is asked then only); nullopt
// for any other capability or range (the TPM answers). With an
// authorization session on the command, the refusal TPM_RC_VALUE
// (parameter 1): the TPM's answer could not be filtered under its HMAC.
std::optional<Bytes> list_handles_of_space(ByteView parameters, bool has_sessions,
                                           const std::function<SpaceListing()>& space);

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_HANDLE_LISTING_H_
