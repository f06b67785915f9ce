// The test programs' main: GoogleTest's, run in a temporary directory of the
// program's own. ::testing::TempDir() names it (TEST_TMPDIR), so the fixed file
// names tests make there never meet another program's, or the same test's in
// another tree run at the same time (two worktrees' suites on one machine
// did: one removed the other's state directory mid-test). Mode 0711, like a
// home directory: other uids a test runs as (setpriv) reach the paths it hands
// them and cannot list or plant anything beside them. Removed at exit.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/test_data.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string dir = tpmsec::testing::make_temp_dir("tpmsec-test");
  if (dir.empty() || ::chmod(dir.c_str(), 0711) != 0 || ::setenv("TEST_TMPDIR", (dir + "/").c_str(), 1) != 0) {
    std::perror("tpmsec tests: a temporary directory of the program's own");
    return 1;
  }
  const pid_t owner = ::getpid();
  const int result = RUN_ALL_TESTS();
  std::error_code ignored;
  if (::getpid() == owner) std::filesystem::remove_all(dir, ignored);
  return result;
}
