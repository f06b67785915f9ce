// What `tpmsec provision` keeps, as the library operations the CLI calls
// (provision.h), on the embedded TPM with a state directory (it outlives the
// process) and host state in memory (testing/memory_host_state.h): what is
// kept is what later opens use, removing it undoes it on the TPM too, and a
// TPM that ends with the process has nothing to keep.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "testing/memory_host_state.h"
#include "tpmsec/commands.h"
#include "tpmsec/provision.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

class ProvisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tpmsec-provision-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The protect path over the embedded TPM kept in dir_, its host state in host_.
  Result<std::unique_ptr<ProtectedTpm>> open(bool use_provisioned) {
    TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, open_transport("embedded:state=" + dir_ + "/tpm"));
    ProtectRequest r;
    r.host = host_;
    r.keep = true;
    r.use_provisioned = use_provisioned;
    r.notice = [](std::string_view) {};
    return ProtectedTpm::open(r, std::move(t));
  }

  std::string dir_;
  std::shared_ptr<testing::MemoryHostState> host_ = std::make_shared<testing::MemoryHostState>();
};

TEST_F(ProvisionTest, ABindSecretIsKeptUsedAndRemoved) {
  {
    auto tpm = open(/*use_provisioned=*/false);
    ASSERT_TRUE(tpm.ok()) << tpm.error().message();
    auto provisioned = provision_bind(**tpm, kDefaultBindIndex);
    ASSERT_TRUE(provisioned.ok()) << provisioned.error().message();
    EXPECT_EQ(provisioned->tpm, (*tpm)->id().text);
    // Kept once: a second provisioning is refused, naming the first.
    auto again = provision_bind(**tpm, kDefaultBindIndex);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(again.error().message().find("already provisioned"), std::string::npos) << again.error().message();
    ProvisionStatus status = provision_status(tpm_id_of((*tpm)->transport()), host_);
    ASSERT_TRUE(status.bind_secret.ok());
    ASSERT_TRUE(status.bind_secret->has_value());
    EXPECT_EQ((*status.bind_secret)->nv_index, kDefaultBindIndex);
  }
  {
    // The next open binds its sessions to it, and a bound session works.
    auto tpm = open(/*use_provisioned=*/true);
    ASSERT_TRUE(tpm.ok()) << tpm.error().message();
    ASSERT_NE((*tpm)->protection().bind, nullptr);
    auto factory = (*tpm)->factory();
    ASSERT_TRUE(factory.ok()) << factory.error().message();
    auto session = (*factory)->start(attr::kEncrypt);
    ASSERT_TRUE(session.ok()) << session.error().message();
    auto random = (*tpm)->tpm().run(cmd::GetRandom{8}, {Auth{session->get(), {}}});
    ASSERT_TRUE(random.ok()) << random.error().message();
    EXPECT_EQ(random->random_bytes.bytes.size(), 8u);
  }
  {
    auto tpm = open(/*use_provisioned=*/false);
    ASSERT_TRUE(tpm.ok()) << tpm.error().message();
    auto removed = unprovision_bind(**tpm);
    ASSERT_TRUE(removed.ok()) << removed.error().message();
    EXPECT_EQ(removed->nv_index, kDefaultBindIndex);
    EXPECT_FALSE(removed->index_was_gone);
    auto status = provision_status(tpm_id_of((*tpm)->transport()), host_);
    ASSERT_TRUE(status.bind_secret.ok());
    EXPECT_FALSE(status.bind_secret->has_value());
    // Nothing left to remove.
    auto twice = unprovision_bind(**tpm);
    ASSERT_FALSE(twice.ok());
    EXPECT_EQ(twice.error().kind(), ErrorKind::kUsage);
  }
}

TEST_F(ProvisionTest, ATpmThatEndsWithTheProcessKeepsNothing) {
  auto transport = open_transport("embedded");
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  ProtectRequest r;
  r.host = host_;
  r.use_provisioned = false;
  auto tpm = ProtectedTpm::open(r, std::move(*transport));
  ASSERT_TRUE(tpm.ok()) << tpm.error().message();
  auto provisioned = provision_bind(**tpm, kDefaultBindIndex);
  ASSERT_FALSE(provisioned.ok());
  EXPECT_EQ(provisioned.error().kind(), ErrorKind::kUsage);
  auto pinned = provision_salt_key(**tpm, kDefaultSaltKeyHandle, /*create=*/true);
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.error().kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace tpmsec
