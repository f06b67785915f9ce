// The order protect.h documents for resolving a session's trust anchor, one
// row per case, over host state in memory (testing/memory_host_state.h):
//   1. an anchor named in the request (NullName, Tofu), or Unsalted;
//   2. Automatic on a TPM that outlives the process: a provisioned bind
//      secret, else a pinned persistent salt key;
//   3. Automatic on a device: TPM: the kernel's null_name pin;
//   4. nothing: refused on a bus, allowed in-process.
// resolve_protection() sends no TPM command, so the transports here answer
// none (ScriptedTransport: no TPM at all); what they describe names the TPM.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "testing/memory_host_state.h"
#include "testing/transport_doubles.h"
#include "tpmsec/protect.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

const std::string kKernelName = "000b" + std::string(64, 'a');
const std::string kNamedName = "000b" + std::string(64, 'b');
constexpr const char* kDevice = "/dev/tpmrm0";
constexpr const char* kKernelPinFile = "/sys/class/tpm/tpm0/null_name";

// A TPM that runs in this process (no bus): as the embedded one, it outlives
// nothing, and it answers no command here.
class InProcessTransport final : public Transport {
 public:
  Result<Bytes> transmit(ByteView) override { return runtime_error("in-process double: no TPM"); }
  std::string describe() const override { return "embedded"; }
  bool in_process() const override { return true; }
  bool outlives_process() const override { return false; }
};

enum class Where { kDevice, kBus, kInProcess };
enum class Won { kNamedPin, kTofu, kBindSecret, kSaltKey, kKernelPin, kUnsalted, kNone };

const char* won_name(Won w) {
  switch (w) {
    case Won::kNamedPin:
      return "the named pin";
    case Won::kTofu:
      return "trust on first use";
    case Won::kBindSecret:
      return "the bind secret";
    case Won::kSaltKey:
      return "the pinned salt key";
    case Won::kKernelPin:
      return "the kernel's pin";
    case Won::kUnsalted:
      return "unsalted";
    case Won::kNone:
      return "nothing";
  }
  return "?";
}

// Which anchor a resolved configuration rests on.
Won won_of(const ProtectionConfig& c) {
  if (c.unsalted) return Won::kUnsalted;
  if (c.bind) return Won::kBindSecret;
  if (c.salt_key) return Won::kSaltKey;
  if (c.pinned_null_name) return c.pin_origin.rfind("--null-name", 0) == 0 ? Won::kNamedPin : Won::kKernelPin;
  if (c.trust_first_use) return Won::kTofu;
  return Won::kNone;
}

struct Row {
  const char* what;
  Anchor anchor;
  Where where;
  bool bind = false;        // `tpmsec provision` kept a bind secret
  bool salt_key = false;    // ... a pinned salt key
  bool kernel_pin = false;  // the kernel exports its pin of kDevice
  bool use_provisioned = true;
  Won won;
  bool anchored;  // a session may start (ProtectedTpm::anchored())
};

TEST(AnchorOrder, ResolvesAsProtectHDocuments) {
  const anchor::NullName named{kNamedName};
  const std::vector<Row> rows{
      // 1. A named anchor wins over everything kept and over the kernel's pin.
      {"named pin over all", named, Where::kDevice, true, true, true, true, Won::kNamedPin, true},
      {"named pin on a bus", named, Where::kBus, true, true, false, true, Won::kNamedPin, true},
      {"tofu over what is provisioned", anchor::Tofu{}, Where::kBus, true, true, false, true, Won::kTofu, true},
      // Tofu on a device with a kernel pin: the pin, never a first use.
      {"tofu on a pinned device", anchor::Tofu{}, Where::kDevice, false, false, true, true, Won::kKernelPin, true},
      {"unsalted over all", anchor::Unsalted{}, Where::kDevice, true, true, true, true, Won::kUnsalted, true},
      // 2. Automatic: what `tpmsec provision` kept, the bind secret first.
      {"bind secret over salt key and kernel pin", anchor::Automatic{}, Where::kDevice, true, true, true, true,
       Won::kBindSecret, true},
      {"salt key over kernel pin", anchor::Automatic{}, Where::kDevice, false, true, true, true, Won::kSaltKey, true},
      {"bind secret on a bus", anchor::Automatic{}, Where::kBus, true, false, false, true, Won::kBindSecret, true},
      {"salt key on a bus", anchor::Automatic{}, Where::kBus, false, true, false, true, Won::kSaltKey, true},
      // ... unless the request is about the salt key itself (provision, null-key).
      {"provisioned not used", anchor::Automatic{}, Where::kDevice, true, true, true, false, Won::kKernelPin, true},
      // 3. Automatic on a device: the kernel's pin.
      {"kernel pin", anchor::Automatic{}, Where::kDevice, false, false, true, true, Won::kKernelPin, true},
      // 4. Nothing: refused on a bus (a device without a pin is one too) ...
      {"nothing on a device", anchor::Automatic{}, Where::kDevice, false, false, false, true, Won::kNone, false},
      {"nothing on a bus", anchor::Automatic{}, Where::kBus, false, false, false, true, Won::kNone, false},
      {"kernel pin of another device", anchor::Automatic{}, Where::kBus, false, false, true, true, Won::kNone, false},
      // ... allowed in process, where nothing kept serves the next process.
      {"nothing in process", anchor::Automatic{}, Where::kInProcess, false, false, false, true, Won::kNone, true},
      {"in process, kept things unused", anchor::Automatic{}, Where::kInProcess, true, true, false, true, Won::kNone,
       true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    std::unique_ptr<Transport> transport;
    if (row.where == Where::kInProcess) {
      transport = std::make_unique<InProcessTransport>();
    } else {
      const std::string text =
          row.where == Where::kDevice ? fmt::format("device:{}", kDevice) : "swtpm:host=127.0.0.1,port=2321";
      transport = std::make_unique<testing::ScriptedTransport>(text);
      // As an opener does: the parsed TPM string is what the anchor reads.
      auto spec = parse_transport_spec(text);
      ASSERT_TRUE(spec.ok()) << spec.error().message();
      transport->set_spec(*spec);
    }
    auto host = std::make_shared<testing::MemoryHostState>();
    const TpmId id = TpmId::of(transport->describe());
    if (row.kernel_pin) {
      host->set_kernel_pin(kDevice, kKernelPinFile);
      host->add_file(kKernelPinFile, kKernelName + "\n");
    }
    if (row.bind) {
      const Bytes secret(32, 0x5e);
      ASSERT_TRUE(host->put_bind_secret(id, BindSecret{0x01005ec0, Bytes(34, 0x0b), SecretBytes(secret)}).ok());
    }
    if (row.salt_key) {
      PersistentSaltKey key;
      key.handle = 0x81000001;
      key.name = Bytes(34, 0x0c);
      ASSERT_TRUE(host->put_salt_key(id, key).ok());
    }
    ProtectRequest request;
    request.anchor = row.anchor;
    request.use_provisioned = row.use_provisioned;
    request.host = host;
    request.notice = [](std::string_view) {};  // the unsalted warning: not this test's
    TpmInfo info;
    info.ecc_p256 = true;
    auto config = resolve_protection(request, *transport, info);
    ASSERT_TRUE(config.ok()) << config.error().message();
    EXPECT_STREQ(won_name(won_of(*config)), won_name(row.won));
    // What ProtectedTpm::anchored() says, and what factory() refuses as
    // kNoTrustAnchor when false.
    EXPECT_EQ(has_trust_anchor(*config) || transport->in_process(), row.anchored);
    if (row.won == Won::kKernelPin) EXPECT_EQ(to_hex(*config->pinned_null_name), kKernelName);
    if (row.won == Won::kNamedPin) EXPECT_EQ(to_hex(*config->pinned_null_name), kNamedName);
  }
}

}  // namespace
}  // namespace tpmsec
