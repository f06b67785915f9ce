// The few fields an intermediary reads of another program's commands and
// responses, decoded in one place: StartAuthSession's request and nonceTPM,
// ContextLoad's savedHandle, FlushContext's flushHandle, GetCapability's
// handle listing, and the Name a name-bearing response carries. Each reads
// the parameter area command_frame.h or response_frame.h split off, as
// hostile bytes, and says when it could not (std::nullopt), never guessing.
// The library's own commands are decoded whole by their definitions
// (commands.h); these read another program's frames, whose parameters may be
// ones commands.h does not model (a vendor's curve, an unusual template).
#ifndef TPMSEC_FRAME_FIELDS_H_
#define TPMSEC_FRAME_FIELDS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

// StartAuthSession's parameters (Part 3 §11.1), as far as they could be
// read: a field past the first one that did not fit stays empty or zero.
struct StartAuthSessionRequest {
  ByteView nonce_caller;
  ByteView encrypted_salt;
  uint8_t session_type = 0;
  uint16_t symmetric = 0;  // TPMT_SYM_DEF.algorithm
  uint16_t auth_hash = 0;
  bool complete = false;  // every field read, the nonce no longer than a digest
};
StartAuthSessionRequest read_start_auth_session(ByteView parameters);
// StartAuthSession's response parameter: nonceTPM (at most a digest).
std::optional<ByteView> read_start_auth_session_nonce(ByteView parameters);

// ContextLoad's TPMS_CONTEXT.savedHandle (Part 2 §14.3: sequence, then
// savedHandle): the handle the context was saved from.
std::optional<uint32_t> read_context_saved_handle(ByteView parameters);

// The savedHandle of exactly one marshalled TPMS_CONTEXT (a context blob a
// resource manager keeps or is handed: ContextSave's response parameters,
// ContextLoad's command parameters), 0 when the bytes are not exactly one.
uint32_t whole_context_saved_handle(ByteView context);

// FlushContext's flushHandle (Part 3 §28.4: a parameter, not a handle).
std::optional<uint32_t> read_flush_handle(ByteView parameters);

// GetCapability's response parameters when they list TPM_CAP_HANDLES
// (Part 3 §30.2: moreData, TPMS_CAPABILITY_DATA with a TPML_HANDLE); none
// for another capability or bytes that are not exactly such a listing.
struct HandleListing {
  uint8_t more_data = 0;
  std::vector<uint32_t> handles;
};
std::optional<HandleListing> read_handle_listing(ByteView parameters);

// Whether GetCapability's command `parameters` ask for TPM_CAP_HANDLES of
// transient objects or of sessions (loaded or saved): the listing a resource
// manager (/dev/tpmrm0, tpm2-abrmd, tpmsec's handle spaces) answers from the
// asking client's own handles, never the TPM's list. The one rule every
// intermediary follows: the spaces answer it, serve's front hands it to
// them, and a wrapper above a resource manager sends it without a session
// (no session could cover an answer the manager writes itself).
bool asks_own_handles(ByteView parameters);
Result<Bytes> write_handle_listing(const HandleListing& listing);

// The Name the response parameters of a name-bearing command carry (Part 3:
// §24.1 CreatePrimary, §12.2 Load, §12.9 CreateLoaded, §12.3 LoadExternal,
// §12.4 ReadPublic, §31.6 NV_ReadPublic), or none: another command, or a
// Name that does not fit or is shorter than nameAlg and a SHA-1 digest.
std::optional<Bytes> name_in_response(uint32_t code, ByteView parameters);

// The public area a Load or LoadExternal command's parameters carry (its
// second parameter, inPublic, after inPrivate: never the one a decrypt
// session encrypts), or none: another command, or parameters that do not
// read. The loaded object's Name is nameAlg || H(this area).
std::optional<ByteView> loaded_public_area(uint32_t code, ByteView parameters);

}  // namespace tpmsec

#endif  // TPMSEC_FRAME_FIELDS_H_
