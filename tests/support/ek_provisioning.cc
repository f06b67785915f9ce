#include "support/ek_provisioning.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/response_code.h"

namespace tpmsec::testing {
namespace {

namespace fs = std::filesystem;

// TPMA_NV of the EK certificate indices swtpm_setup defines (Part 2 §13.4):
// PPWRITE | WRITEDEFINE | PPREAD | OWNERREAD | AUTHREAD | NO_DA | PLATFORMCREATE.
constexpr uint32_t kEkCertNvAttributes = 0x00000001 | 0x00002000 | 0x00010000 | 0x00020000 | 0x00040000 |
                                         0x02000000 | 0x40000000;
constexpr uint32_t kNvDefineSpace = 0x12A;  // Part 3 §31.3
constexpr uint32_t kNvWrite = 0x137;        // Part 3 §31.8
constexpr size_t kNvWriteChunk = 512;

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) return runtime_error("cannot write " + path.string());
  return ok_status();
}

Result<Bytes> read_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return runtime_error("cannot read " + path.string());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status run(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv);
  if (r.exit_code != 0) {
    return runtime_error(fmt::format("{} exited {}: {}{}", argv[0], r.exit_code, r.out, r.err));
  }
  return ok_status();
}

// One command under the password session (empty password), sent as is.
Status run_password_command(Transport& transport, uint32_t code, std::vector<uint32_t> handles, Bytes parameters) {
  TPMSEC_ASSIGN_OR_RETURN(Bytes rsp, transport.transmit(testing::password_command(code, std::move(handles), std::move(parameters))));
  uint32_t rc = response_code_of(rsp);
  if (rc != rc::kSuccess) return runtime_error(fmt::format("command 0x{:x} failed: TPM rc 0x{:x}", code, rc));
  return ok_status();
}

}  // namespace

bool have_swtpm_setup() {
  return have_program("swtpm") && have_program("swtpm_setup") && have_program("swtpm_localca") &&
         have_program("swtpm_cert");
}

Result<ProvisionedTpm> provision_tpm(const std::string& work_dir) {
  ProvisionedTpm p;
  fs::path work(work_dir);
  p.state_dir = (work / "state").string();
  p.ca_dir = (work / "ca").string();
  p.trust_dir = (work / "trust").string();
  p.signing_key = (work / "ca" / "signkey.pem").string();
  p.issuer_cert = (work / "ca" / "issuercert.pem").string();
  p.root_cert = (work / "ca" / "swtpm-localca-rootca-cert.pem").string();
  std::error_code ec;
  for (const std::string& d : {p.state_dir, p.ca_dir, p.trust_dir}) {
    fs::create_directories(d, ec);
    if (ec) return runtime_error("cannot create " + d);
  }
  // swtpm_localca creates its root and intermediate in statedir on first use.
  fs::path localca_conf = work / "swtpm-localca.conf";
  TPMSEC_RETURN_IF_ERROR(write_text(localca_conf, fmt::format("statedir = {}\nsigningkey = {}\nissuercert = {}\n"
                                                              "certserial = {}\n",
                                                              p.ca_dir, p.signing_key, p.issuer_cert,
                                                              (work / "ca" / "certserial").string())));
  fs::path setup_conf = work / "swtpm_setup.conf";
  TPMSEC_RETURN_IF_ERROR(write_text(setup_conf, fmt::format("create_certs_tool = /usr/bin/swtpm_localca\n"
                                                            "create_certs_tool_config = {}\n",
                                                            localca_conf.string())));
  TPMSEC_RETURN_IF_ERROR(run({"swtpm_setup", "--tpm2", "--tpmstate", p.state_dir, "--create-ek-cert", "--config",
                              setup_conf.string(), "--overwrite", "--pcr-banks", "sha256"}));
  for (const std::string& cert : {p.root_cert, p.issuer_cert}) {
    fs::copy_file(cert, fs::path(p.trust_dir) / fs::path(cert).filename(), ec);
    if (ec) return runtime_error(fmt::format("cannot copy {}: {}", cert, ec.message()));
  }
  return p;
}

Status add_ecc_p256_ek_certificate(Tpm& tpm, const ProvisionedTpm& ca, const std::string& work_dir) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kEndorsement);
  c.in_public.public_area = ek_template(SaltKind::kEcc);
  TPMSEC_ASSIGN_OR_RETURN(auto ek, tpm.run(c, {Auth::password()}));
  TPMSEC_RETURN_IF_ERROR(tpm.flush(ek.object_handle));
  const Public& pub = ek.out_public.public_area;

  fs::path der_path = fs::path(work_dir) / "ecc-p256-ek.der";
  // The attributes swtpm_localca gives its own EK certificates.
  TPMSEC_RETURN_IF_ERROR(run({"swtpm_cert", "--tpm2", "--type", "ek", "--ecc-x", to_hex(pub.unique_x), "--ecc-y",
                              to_hex(pub.unique_y), "--ecc-curveid", "secp256r1", "--signkey", ca.signing_key,
                              "--issuercert", ca.issuer_cert, "--out-cert", der_path.string(), "--serial", "4242",
                              "--days", "3650", "--tpm-manufacturer", "id:00001014", "--tpm-model", "swtpm",
                              "--tpm-version", "id:20191023", "--tpm-spec-family", "2.0", "--tpm-spec-level", "0",
                              "--tpm-spec-revision", "164", "--decryption"}));
  TPMSEC_ASSIGN_OR_RETURN(Bytes der, read_binary(der_path));
  if (der.empty() || der.size() > kMaxEkCertificateBytes) return runtime_error("swtpm_cert wrote no certificate");

  Writer define;
  define.tpm2b({}, "auth");
  marshal(define, NvPublicArea{NvPublic{kEkCertIndexEccP256, alg::kSha256, kEkCertNvAttributes, {},
                                        static_cast<uint16_t>(der.size())}});
  TPMSEC_ASSIGN_OR_RETURN(Bytes define_params, define.finish());
  Transport& t = tpm.transport();
  TPMSEC_RETURN_IF_ERROR(run_password_command(t, kNvDefineSpace, {rh::kPlatform}, define_params));
  for (size_t offset = 0; offset < der.size(); offset += kNvWriteChunk) {
    size_t n = std::min(kNvWriteChunk, der.size() - offset);
    Writer w;
    w.tpm2b(ByteView(der).subspan(offset, n), "data");
    w.u16(static_cast<uint16_t>(offset));
    TPMSEC_ASSIGN_OR_RETURN(Bytes write_params, w.finish());
    TPMSEC_RETURN_IF_ERROR(run_password_command(t, kNvWrite, {rh::kPlatform, kEkCertIndexEccP256}, write_params));
  }
  return ok_status();
}

}  // namespace tpmsec::testing
