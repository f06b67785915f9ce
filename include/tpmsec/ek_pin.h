// The EK of each TPM, pinned on its first verified use (--ek-ca).
//
// An EK certificate proves "a genuine TPM of this manufacturer", not "this
// machine's TPM": an interposer that relays every command to another
// genuine TPM certified by the same CA passes every check the certificate
// makes, and that other TPM's PCRs get this machine's measurements. So the
// EK is pinned per TPM string (and key type) on first verified use, as
// --tofu pins the null key, but for good: the endorsement seed survives
// TPM Resets, so the EK's name never legitimately changes. A later EK of
// another name for that TPM string is an integrity failure (exit 3); an
// operator who replaced the TPM forgets the pin with
// 'tpmsec null-key --forget --tpm TPM'.
//
// The record also remembers, per host boot, that the TPM holding this EK
// showed the null key the kernel pinned (/sys/class/tpm/tpmN/null_name), so
// a device: TPM makes that proof once per boot (session_factory.h).
//
// What it rests on: the first use being clean for a TPM without a kernel
// pin (a relay present then is pinned, as with any TOFU), and the state
// directory being writable only by its owner (file_host_state.h).
#ifndef TPMSEC_EK_PIN_H_
#define TPMSEC_EK_PIN_H_

#include <optional>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"

namespace tpmsec {

// What the factory is told of a pinned EK, and reports of a new one.
struct EkPin {
  SaltKind kind = SaltKind::kEcc;
  Bytes name;  // the EK's name (nameAlg || H(public area))
  // The TPM holding this EK showed the kernel's pinned null key this boot.
  bool null_key_proven = false;
};

// What is kept of a pinned EK (HostState::ek_pin, host_state.h): written
// whole or not at all, per TPM string and key type.
struct EkPinRecord {
  Bytes name;
  // The boot in which, and the null key name for which, the TPM holding
  // this EK showed the kernel's pin; empty when never.
  std::string null_boot;
  Bytes null_name;
};

}  // namespace tpmsec

#endif  // TPMSEC_EK_PIN_H_
