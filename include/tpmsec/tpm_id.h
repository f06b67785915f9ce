// Which TPM host state is kept for (host_state.h): the TPM string a transport
// describes itself by (Transport::describe(), transport.h), and the key a
// store files it under, computed here once. Made from a parsed TPM string
// (tpm_id_of(TpmSpec), tpmsec/transport/tpm_string.h), which renders that
// text as the transport would, without opening it.
#ifndef TPMSEC_TPM_ID_H_
#define TPMSEC_TPM_ID_H_

#include <string>

namespace tpmsec {

struct TpmId {
  // The TPM string ("device:/dev/tpmrm0", "swtpm:host=...,port=2321"): what
  // records hold and messages show. It can hold any character.
  std::string text;
  // A name safe in any file system: the first 16 bytes of SHA-256(text), in
  // lowercase hex (32 characters).
  std::string key;

  static TpmId of(std::string text);
};

// A program whose commands a front end protects (the TCTI), for what is kept
// per program (host_state.h): its executable's path, and a key computed as
// TpmId's.
struct ProgramId {
  std::string path;
  std::string key;

  static ProgramId of(std::string path);
};

}  // namespace tpmsec

#endif  // TPMSEC_TPM_ID_H_
