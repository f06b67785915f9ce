#include "tpmsec/host_state.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"
#include "tpmsec/text.h"

namespace tpmsec {

HostState::~HostState() = default;

Result<Bytes> parse_null_name(const std::string& hex_or_path, const HostState& host) {
  std::string text(trim(hex_or_path));
  if (text.find('/') != std::string::npos) {
    TPMSEC_ASSIGN_OR_RETURN(std::string line, host.read_null_name_file(text));
    text = std::string(trim(line));
  }
  auto name = from_hex(text);
  if (!name.ok()) return usage_error("null key name: " + name.error().message());
  if (name->size() < 2 || !digest_size(static_cast<uint16_t>((*name)[0] << 8 | (*name)[1])) ||
      name->size() != 2u + *digest_size(static_cast<uint16_t>((*name)[0] << 8 | (*name)[1]))) {
    return usage_error(
        fmt::format("null key name must be a hash algorithm id and its digest (68 hex digits for "
                    "SHA-256), got {} bytes",
                    name->size()));
  }
  return name;
}

Result<crypto::CaBundle> load_ca_bundle(const std::string& file_or_dir, const HostState& host) {
  TPMSEC_ASSIGN_OR_RETURN(std::vector<crypto::PemFile> files, host.read_ca_files(file_or_dir));
  return crypto::CaBundle::from_pem_files(file_or_dir, files);
}

Result<crypto::CaBundle> load_ek_roots(const std::string& roots, const std::string& intermediates,
                                       const HostState& host) {
  TPMSEC_ASSIGN_OR_RETURN(std::vector<crypto::PemFile> files, host.read_ca_files(roots));
  std::vector<crypto::PemFile> pems;
  for (crypto::PemFile& f : files) {
    if (f.name.size() > 4 && f.name.compare(f.name.size() - 4, 4, ".pem") == 0) pems.push_back(std::move(f));
  }
  TPMSEC_ASSIGN_OR_RETURN(crypto::CaBundle bundle, crypto::CaBundle::from_pem_files(roots, pems));
  if (!intermediates.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(std::vector<crypto::PemFile> cached, host.read_ca_files(intermediates));
    TPMSEC_RETURN_IF_ERROR(bundle.add_intermediates(cached));
  }
  return bundle;
}

}  // namespace tpmsec
