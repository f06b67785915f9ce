// Errors as values. Every fallible call in tpmsec returns Status or Result<T>;
// exceptions never cross the library boundary.
//
// An Error carries a kind (which decides the CLI exit code), a one-line
// message naming the problem, and for TPM failures the raw response code.
#ifndef TPMSEC_RESULT_H_
#define TPMSEC_RESULT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace tpmsec {

enum class ErrorKind {
  kUsage,        // bad input from the caller (malformed argument, bad TPM string)
  kRuntime,      // the environment failed: I/O, connection, resources
  kTpm,          // the TPM answered with a non-zero response code
  kParse,        // bytes from the TPM (or a file) were malformed
  kIntegrity,    // a response failed authentication, or a pinned name changed
  kUnsupported,  // the TPM or build lacks what was asked for
};

// Why, where a caller decides on it rather than on the message text.
enum class ErrorReason {
  kNone,
  // The TPM's null key is not the pinned one: a TPM Reset since the pin (the
  // null seed changed) or another TPM. Stream rigs may accept a reset.
  kNullKeyChanged,
  // The TPM's identity read through an audited session differs from the
  // plain read: an interposer rewrote the plain one.
  kIdentityForged,
  // A TPM behind a bus and no trust anchor for the salt key (protect.h): the
  // front end says which of its options name one.
  kNoTrustAnchor,
  // ECC salt asked for on a TPM without P-256: the front end says how to ask
  // for RSA.
  kUnsupportedSalt,
  // An EK-certificate anchor asked for on a TPM without an EK certificate:
  // the front end names its other anchors.
  kNoEkCertificate,
  // A wrapper in strict mode (wrap.h) refused a command whose secret would
  // cross the bus in clear: the front end names the command and the option.
  kSecretInClear,
};

class Error {
 public:
  Error(ErrorKind kind, std::string message, uint32_t tpm_rc = 0, ErrorReason reason = ErrorReason::kNone)
      : kind_(kind), message_(std::move(message)), tpm_rc_(tpm_rc), reason_(reason) {}

  ErrorKind kind() const { return kind_; }
  ErrorReason reason() const { return reason_; }
  // Returns a copy carrying `reason`.
  Error with_reason(ErrorReason reason) const { return Error(kind_, message_, tpm_rc_, reason); }
  const std::string& message() const { return message_; }
  // The TPM response code when kind() == kTpm, else 0.
  uint32_t tpm_rc() const { return tpm_rc_; }

  // Returns a copy whose message is "context: message".
  Error with_context(const std::string& context) const {
    return Error(kind_, context + ": " + message_, tpm_rc_, reason_);
  }

 private:
  ErrorKind kind_;
  std::string message_;
  uint32_t tpm_rc_;
  ErrorReason reason_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_{ErrorKind::kRuntime, ""};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

// The Status of a Result, dropping its value.
template <class T>
Status status_of(const Result<T>& r) {
  return r.ok() ? Status() : Status(r.error());
}

inline Error usage_error(std::string m) { return Error(ErrorKind::kUsage, std::move(m)); }
inline Error runtime_error(std::string m) { return Error(ErrorKind::kRuntime, std::move(m)); }
inline Error parse_error(std::string m) { return Error(ErrorKind::kParse, std::move(m)); }
inline Error integrity_error(std::string m) { return Error(ErrorKind::kIntegrity, std::move(m)); }
inline Error unsupported_error(std::string m) { return Error(ErrorKind::kUnsupported, std::move(m)); }

}  // namespace tpmsec

#define TPMSEC_CONCAT_INNER(a, b) a##b
#define TPMSEC_CONCAT(a, b) TPMSEC_CONCAT_INNER(a, b)

// Propagates the error of a Status or Result expression.
#define TPMSEC_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    auto&& tpmsec_status_ = (expr);                          \
    if (!tpmsec_status_.ok()) return tpmsec_status_.error(); \
  } while (0)

// Declares or assigns `lhs` from a Result, propagating its error.
#define TPMSEC_ASSIGN_OR_RETURN(lhs, expr) \
  TPMSEC_ASSIGN_OR_RETURN_IMPL(TPMSEC_CONCAT(tpmsec_result_, __LINE__), lhs, expr)
#define TPMSEC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.error();                 \
  lhs = std::move(tmp).value()

#endif  // TPMSEC_RESULT_H_
