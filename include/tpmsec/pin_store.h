// Trust on first use of the null key, kept per TPM and per host boot.
//
// The null key's name is a function of the TPM's null seed, which every TPM
// Reset (every host boot) regenerates. A pin therefore holds for one boot of
// this host: it is keyed by the TPM string the client uses and the salt kind,
// and stored with the kernel's boot id (/proc/sys/kernel/random/boot_id). A
// pin of an earlier boot is stale: the next first use replaces it.
//
// What it rests on (docs/threat-model.md): the first use of each boot being
// clean. An interposer present at that first use wins until the pin is
// forgotten; one that arrives later is caught (the name differs: exit 3).
// Nothing from the TPM is used to decide which boot it is: a forged "new
// boot" could otherwise make tpmsec take a new pin.
#ifndef TPMSEC_PIN_STORE_H_
#define TPMSEC_PIN_STORE_H_

#include <optional>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

// Where tpmsec keeps what outlives a process: $TPMSEC_STATE_DIR, else
// /var/lib/tpmsec for root, else $XDG_STATE_HOME/tpmsec or
// ~/.local/state/tpmsec.
std::string default_state_dir();

// This host's boot id: /proc/sys/kernel/random/boot_id, or
// in test builds (CMake option TPMSEC_TEST_HOOKS) $TPMSEC_BOOT_ID when set
// (tests simulate a reboot with it); release builds ignore it.
Result<std::string> host_boot_id();

class PinStore {
 public:
  // Pins live in DIR/null-key-pins/ (created 0700 on the first put()).
  explicit PinStore(std::string state_dir);

  struct Pin {
    Bytes name;
    std::string boot_id;
  };
  // The pin kept for `tpm` and `salt` ("ecc", "rsa"), whatever its boot;
  // none when there is none. A malformed pin file is a kParse error naming it.
  Result<std::optional<Pin>> get(const std::string& tpm, const std::string& salt) const;
  // The pin if it is of `boot_id` (this boot); none otherwise.
  Result<std::optional<Bytes>> current(const std::string& tpm, const std::string& salt,
                                       const std::string& boot_id) const;
  // Keeps `name` for `tpm`, `salt` and `boot_id`: written to a temporary
  // file, synced and renamed, so a pin is whole or absent.
  Status put(const std::string& tpm, const std::string& salt, const std::string& boot_id, ByteView name);
  // Removes the pins of `tpm` (every salt kind). True when one existed.
  Result<bool> forget(const std::string& tpm);

  const std::string& dir() const { return dir_; }
  // The file that holds the pin of `tpm` and `salt`.
  std::string path(const std::string& tpm, const std::string& salt) const;

 private:
  std::string dir_;
};

}  // namespace tpmsec

#endif  // TPMSEC_PIN_STORE_H_
