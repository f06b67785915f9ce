// tpmsec: protect TPM 2.0 traffic, and measure what the protection costs.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "cli.h"
#include "serve_daemon.h"

namespace {

using namespace tpmsec::cli;

void register_commands(CLI::App& app, Action* action) {
  register_info(app, action);
  register_pcr(app, action);
  register_random(app, action);
  register_null_key(app, action);
  register_bench(app, action);
  register_profiles(app, action);
  register_profile(app, action);
  register_policy(app, action);
  register_replay(app, action);
  register_verify(app, action);
  register_predict(app, action);
  register_trace(app, action);
  register_compare(app, action);
  register_provision(app, action);
  register_emulate(app, action);
  register_serve(app, action);
}

bool is_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(name)) return true;
  }
  return false;
}

// Parses the command line into `app` (its callback sets the action); an
// exit code when the program ends here (help, version, a usage error).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  // CLI11 reports a mistyped command as "a subcommand is required": name it.
  if (argc > 1 && argv[1][0] != '-' && !is_command(app, argv[1])) {
    fmt::print(stderr, "tpmsec: unknown command '{}' (see tpmsec --help)\n", argv[1]);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "invalid command line";
    // `tpmsec --tpm X info`: CLI11 says only that the arguments were not
    // expected; the options belong to the command.
    std::string hint;
    for (int i = 2; i < argc && argv[1][0] == '-' && hint.empty(); ++i) {
      if (is_command(app, argv[i])) {
        hint = fmt::format("; options go after the command: tpmsec {} {} ...", argv[i], argv[1]);
      }
    }
    fmt::print(stderr, "tpmsec: {}{} (see tpmsec --help)\n", what, hint);
    return kExitUsage;
  }
  return std::nullopt;
}

// Runs the command. fmt::print on a stdout that cannot be written (a full
// disk, a closed descriptor) throws std::system_error: one line and exit 1,
// never an abort. Unwinding still runs every destructor, so the TPM's
// handles are flushed.
tpmsec::Status run_action(const Action& action) {
  tpmsec::Status status = tpmsec::ok_status();
  try {
    status = action();
  } catch (const std::system_error& e) {
    status = tpmsec::runtime_error(fmt::format("cannot write standard output: {}", e.code().message()));
  } catch (const std::exception& e) {
    status = tpmsec::runtime_error(e.what());
  }
  // Output that never reached its destination is a failure, not exit 0.
  if (status.ok() && (std::fflush(stdout) != 0 || std::ferror(stdout) || std::fclose(stdout) != 0)) {
    status = tpmsec::runtime_error(fmt::format("cannot write standard output: {}", std::strerror(errno)));
  }
  return status;
}

// The exit code of `status`, its error printed.
int exit_with(const tpmsec::Status& status) {
  if (status.ok()) print_success_notes();
  if (!status.ok()) {
    const auto& e = status.error();
    if (e.kind() == tpmsec::ErrorKind::kIntegrity) {
      fmt::print(stderr, "{}tpmsec: integrity failure: {}\n", tpmsec::cli::error_line_prefix(), e.message());
    } else {
      fmt::print(stderr, "{}tpmsec: {}{}\n", tpmsec::cli::error_line_prefix(), e.message(),
                 tpmsec::cli::advice_for(e.reason()));
    }
    return exit_code_for(e);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpmsec: protect TPM 2.0 bus traffic with salted HMAC sessions, and measure what it costs", "tpmsec"};
  app.set_version_flag("--version", TPMSEC_VERSION);
  app.require_subcommand(1);
  app.footer(
      "TPM strings follow tpm2-tss TCTI syntax (embedded, swtpm:host=H,port=P, device:/dev/tpmrm0), with tpmsec's\n"
      "protection items appended as in TPM2TOOLS_TCTI=tpmsec:... (null-name=, ek-ca=, tofu, salt=, policy=).\n"
      "Exit codes: 0 success, 1 runtime failure (TPM error, connection), 2 usage error, 3 integrity failure.");
  Action action;
  register_commands(app, &action);
  if (std::optional<int> code = parse_command_line(app, argc, argv)) return *code;
  if (!action) {
    fmt::print(stderr, "tpmsec: no command given (see tpmsec --help)\n");
    return kExitUsage;
  }
  return exit_with(run_action(action));
}
