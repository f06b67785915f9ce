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
constexpr uint32_t kEkCertNvAttributes =
    0x00000001 | 0x00002000 | 0x00010000 | 0x00020000 | 0x00040000 | 0x02000000 | 0x40000000;
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
  TPMSEC_ASSIGN_OR_RETURN(
      Bytes rsp, transport.transmit(testing::password_command(code, std::move(handles), std::move(parameters))));
  uint32_t rc = response_code_of(rsp);
  if (rc != rc::kSuccess) return runtime_error(fmt::format("command 0x{:x} failed: TPM rc 0x{:x}", code, rc));
  return ok_status();
}

}  // namespace

bool have_swtpm_setup() {
  return have_program("swtpm") && have_program("swtpm_setup") && have_program("swtpm_localca") &&
         have_program("swtpm_cert");
}

Result<ProvisionedTpm> provision_tpm(const std::string& work_dir, const ProvisionedTpm* same_ca) {
  ProvisionedTpm p;
  fs::path work(work_dir);
  p.state_dir = (work / "state").string();
  p.ca_dir = same_ca ? same_ca->ca_dir : (work / "ca").string();
  p.trust_dir = (work / "trust").string();
  p.signing_key = (fs::path(p.ca_dir) / "signkey.pem").string();
  p.issuer_cert = (fs::path(p.ca_dir) / "issuercert.pem").string();
  p.root_cert = (fs::path(p.ca_dir) / "swtpm-localca-rootca-cert.pem").string();
  std::error_code ec;
  for (const std::string& d : {p.state_dir, p.ca_dir, p.trust_dir}) {
    fs::create_directories(d, ec);
    if (ec) return runtime_error("cannot create " + d);
  }
  // swtpm_localca creates its root and intermediate in statedir on first use.
  fs::path localca_conf = work / "swtpm-localca.conf";
  TPMSEC_RETURN_IF_ERROR(write_text(
      localca_conf, fmt::format("statedir = {}\nsigningkey = {}\nissuercert = {}\n"
                                "certserial = {}\n",
                                p.ca_dir, p.signing_key, p.issuer_cert, (fs::path(p.ca_dir) / "certserial").string())));
  fs::path setup_conf = work / "swtpm_setup.conf";
  TPMSEC_RETURN_IF_ERROR(write_text(setup_conf, fmt::format("create_certs_tool = /usr/bin/swtpm_localca\n"
                                                            "create_certs_tool_config = {}\n",
                                                            localca_conf.string())));
  TPMSEC_RETURN_IF_ERROR(run({"swtpm_setup", "--tpm2", "--tpmstate", p.state_dir, "--create-ek-cert", "--config",
                              setup_conf.string(), "--overwrite", "--pcr-banks", "sha256"}));
  for (const std::string& cert : {p.root_cert, p.issuer_cert}) {
    fs::copy_file(cert, fs::path(p.trust_dir) / fs::path(cert).filename(), fs::copy_options::overwrite_existing, ec);
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
  TPMSEC_RETURN_IF_ERROR(run({"swtpm_cert",
                              "--tpm2",
                              "--type",
                              "ek",
                              "--ecc-x",
                              to_hex(pub.unique_x),
                              "--ecc-y",
                              to_hex(pub.unique_y),
                              "--ecc-curveid",
                              "secp256r1",
                              "--signkey",
                              ca.signing_key,
                              "--issuercert",
                              ca.issuer_cert,
                              "--out-cert",
                              der_path.string(),
                              "--serial",
                              "4242",
                              "--days",
                              "3650",
                              "--tpm-manufacturer",
                              "id:00001014",
                              "--tpm-model",
                              "swtpm",
                              "--tpm-version",
                              "id:20191023",
                              "--tpm-spec-family",
                              "2.0",
                              "--tpm-spec-level",
                              "0",
                              "--tpm-spec-revision",
                              "164",
                              "--decryption"}));
  TPMSEC_ASSIGN_OR_RETURN(Bytes der, read_binary(der_path));
  if (der.empty() || der.size() > kMaxEkCertificateBytes) return runtime_error("swtpm_cert wrote no certificate");

  Writer define;
  define.tpm2b({}, "auth");
  marshal(define, NvPublicArea{NvPublic{
                      kEkCertIndexEccP256, alg::kSha256, kEkCertNvAttributes, {}, static_cast<uint16_t>(der.size())}});
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

Result<KeyFiles> make_key(const std::string& dir, const std::string& name,
                          const std::vector<std::string>& algorithm_args) {
  KeyFiles k{(fs::path(dir) / (name + ".key")).string(), (fs::path(dir) / (name + ".pub")).string()};
  std::vector<std::string> argv{"openssl", "genpkey", "-out", k.private_key};
  argv.insert(argv.end(), algorithm_args.begin(), algorithm_args.end());
  TPMSEC_RETURN_IF_ERROR(run(argv));
  TPMSEC_RETURN_IF_ERROR(run({"openssl", "pkey", "-in", k.private_key, "-pubout", "-out", k.public_key}));
  return k;
}

Result<std::string> ecc_p256_public_key_file(const std::string& dir, const std::string& name, const Public& key) {
  if (key.type != alg::kEcc || key.curve != curve::kNistP256 || key.unique_x.size() != 32 ||
      key.unique_y.size() != 32) {
    return usage_error("not an ECC P-256 public area");
  }
  // SubjectPublicKeyInfo (RFC 5480 §2) of id-ecPublicKey on prime256v1, then
  // the uncompressed point 04 || x || y.
  Bytes spki = *from_hex("3059301306072a8648ce3d020106082a8648ce3d03010703420004");
  spki.insert(spki.end(), key.unique_x.begin(), key.unique_x.end());
  spki.insert(spki.end(), key.unique_y.begin(), key.unique_y.end());
  fs::path der = fs::path(dir) / (name + ".pub.der");
  {
    std::ofstream out(der, std::ios::binary);
    out.write(reinterpret_cast<const char*>(spki.data()), static_cast<std::streamsize>(spki.size()));
    if (!out) return runtime_error("cannot write " + der.string());
  }
  std::string pem = (fs::path(dir) / (name + ".pub")).string();
  TPMSEC_RETURN_IF_ERROR(run({"openssl", "pkey", "-pubin", "-inform", "DER", "-in", der.string(), "-out", pem}));
  return pem;
}

Result<CertificateFiles> issue_certificate(const std::string& dir, const CertificateSpec& spec) {
  fs::path base = fs::path(dir) / spec.name;
  std::string extensions = fmt::format("[ext]\nbasicConstraints = critical, CA:{}\nsubjectKeyIdentifier = hash\n",
                                       spec.ca ? "TRUE" : "FALSE");
  if (!spec.key_usage.empty()) extensions += "keyUsage = critical, " + spec.key_usage + "\n";
  if (!spec.extended_key_usage.empty()) extensions += "extendedKeyUsage = " + spec.extended_key_usage + "\n";
  if (!spec.extra_extensions.empty()) extensions += spec.extra_extensions + "\n";
  fs::path ext_file = base.string() + ".ext";
  TPMSEC_RETURN_IF_ERROR(write_text(ext_file, extensions));
  CertificateFiles out{base.string() + ".pem", {}};
  std::vector<std::string> argv{"openssl", "x509", "-new",     "-subj",           "/CN=tpmsec test " + spec.name,
                                "-days",   "1",    "-extfile", ext_file.string(), "-extensions",
                                "ext",     "-out", out.pem};
  if (spec.issuer_cert.empty()) {
    argv.insert(argv.end(), {"-key", spec.issuer_key});
  } else {
    argv.insert(argv.end(), {"-CA", spec.issuer_cert, "-CAkey", spec.issuer_key});
  }
  if (!spec.public_key.empty()) argv.insert(argv.end(), {"-force_pubkey", spec.public_key});
  TPMSEC_RETURN_IF_ERROR(run(argv));
  std::string der = base.string() + ".der";
  TPMSEC_RETURN_IF_ERROR(run({"openssl", "x509", "-in", out.pem, "-outform", "DER", "-out", der}));
  TPMSEC_ASSIGN_OR_RETURN(out.der, read_binary(der));
  return out;
}

Rule serve_ek_certificate(uint32_t nv_index, Bytes der, Rule next, size_t* served) {
  return [nv_index, der = std::move(der), next = std::move(next), served](const ProxiedCommand& c,
                                                                          Upstream& tpm) -> Reply {
    auto f = parse_command(c.bytes);
    bool ours = f.ok() && !f->handles.empty() && f->handles.back() == nv_index &&
                (c.code == cc::kNvReadPublic || c.code == cc::kNvRead);
    if (!ours) return next ? next(c, tpm) : pass(c, tpm);
    ResponseFrame r;
    Writer w;
    if (c.code == cc::kNvReadPublic) {
      cmd::NvReadPublic::Response rsp;
      rsp.nv_public.nv_public = NvPublic{
          nv_index, alg::kSha256, kEkCertNvAttributes | nv_attr::kWritten, {}, static_cast<uint16_t>(der.size())};
      rsp.nv_name.bytes = compute_name(rsp.nv_public.nv_public).value();
      marshal_all(w, rsp.params());
    } else {
      Reader reader(f->parameters);
      uint16_t size = reader.u16("size"), offset = reader.u16("offset");
      if (!reader.ok() || size_t{offset} + size > der.size()) return Reply::close();
      cmd::NvRead::Response rsp;
      rsp.data.bytes.assign(der.begin() + offset, der.begin() + offset + size);
      marshal_all(w, rsp.params());
      r.sessions.push_back(password_response_entry());
      if (served) ++*served;
    }
    r.parameters = w.finish().value();
    return Reply::answer(build_response(r));
  };
}

}  // namespace tpmsec::testing
