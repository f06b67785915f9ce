// The frame codec (tpmsec/command_frame.h, tpmsec/response_frame.h,
// tpmsec/frame_fields.h, tpmsec/frame_rewrite.h): what it writes it reads back field for field; it
// refuses every truncated, oversized or inconsistent frame; and the frames
// the reference TPM (the embedded libtpms) exchanges with Tpm::run, read by
// it and written back, are the same bytes.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "testing/transport_doubles.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/frame_rewrite.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr size_t kMax = 4096;

Bytes entry(uint32_t handle, size_t nonce_bytes, uint8_t attributes, size_t hmac_bytes, bool command) {
  Bytes nonce(nonce_bytes, 0x4e), hmac(hmac_bytes, 0x48);
  auto e =
      write_auth_entry(AuthEntry{.handle = handle, .nonce = nonce, .attributes = attributes, .hmac = hmac}, command);
  EXPECT_TRUE(e.ok()) << e.error().message();
  return e.ok() ? *e : Bytes();
}

// A CreatePrimary-shaped response: one handle, parameters, `sessions` entries.
Bytes sample_response(size_t sessions) {
  Bytes params = {0x00, 0x03, 0xaa, 0xbb, 0xcc, 0x01};
  std::vector<Bytes> entries;
  for (size_t i = 0; i < sessions; ++i) entries.push_back(entry(0, 32, attr::kContinueSession, 32, false));
  std::vector<ByteView> views(entries.begin(), entries.end());
  const uint32_t handles[] = {0x80000001};
  auto r = write_response_frame(rc::kSuccess, handles, params, views, kMax);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : Bytes();
}

TEST(CommandCodec, WrittenFramesReadBack) {
  const uint32_t handles[] = {0x81000001, 0x01500000};
  Bytes params = {0x00, 0x02, 0x12, 0x34, 0x77};
  for (size_t n = 0; n <= 3; ++n) {
    std::vector<Bytes> entries;
    for (size_t i = 0; i < n; ++i) entries.push_back(entry(0x02000000 + i, 32, attr::kContinueSession, 32, true));
    std::vector<ByteView> views(entries.begin(), entries.end());
    auto frame = write_command_frame(cc::kNvWrite, handles, views, params, kMax);
    ASSERT_TRUE(frame.ok()) << frame.error().message();
    auto areas = read_command_areas(*frame, kMax);
    ASSERT_TRUE(areas.ok()) << n << ": " << areas.error().message();
    EXPECT_EQ(areas->info->code, cc::kNvWrite);
    EXPECT_EQ(areas->handles, std::vector<uint32_t>(std::begin(handles), std::end(handles)));
    ASSERT_EQ(areas->sessions.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(areas->sessions[i].handle, 0x02000000 + i);
      EXPECT_EQ(Bytes(areas->sessions[i].raw.begin(), areas->sessions[i].raw.end()), entries[i]);
    }
    EXPECT_EQ(Bytes(areas->parameters.begin(), areas->parameters.end()), params);
    EXPECT_EQ(load_be32(frame->data() + 2), frame->size());
    EXPECT_EQ(frame->at(1), n ? 0x02 : 0x01) << "the tag says whether a session area follows";
  }
}

TEST(CommandCodec, RefusesWhatDoesNotFit) {
  const uint32_t handles[] = {0x81000001, 0x01500000};
  Bytes e = entry(rh::kPasswordSession, 0, attr::kContinueSession, 0, true);
  const ByteView views[] = {e};
  auto frame = write_command_frame(cc::kNvWrite, handles, views, Bytes(8, 1), kMax);
  ASSERT_TRUE(frame.ok());
  for (size_t n = 0; n < frame->size(); ++n) {
    EXPECT_FALSE(read_command_areas(ByteView(*frame).first(n), kMax).ok()) << "a prefix of " << n << " bytes";
  }
  EXPECT_FALSE(read_command_areas(*frame, frame->size() - 1).ok()) << "above max_size";
  Bytes longer = *frame;
  longer.push_back(0);
  EXPECT_FALSE(read_command_areas(longer, kMax).ok()) << "a byte the header does not count";
  auto big = write_command_frame(cc::kNvWrite, handles, views, Bytes(kMax, 1), kMax);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().kind(), ErrorKind::kUsage);
  Bytes nonce(65, 0);
  EXPECT_FALSE(write_auth_entry(AuthEntry{.nonce = nonce}, true).ok()) << "a nonce longer than a digest";
}

TEST(ResponseCodec, WrittenFramesReadBack) {
  for (size_t n = 0; n <= 3; ++n) {
    Bytes frame = sample_response(n);
    auto areas = read_response_areas(frame, 1, kMax);
    ASSERT_TRUE(areas.ok()) << n << ": " << areas.error().message();
    EXPECT_EQ(areas->header.code, rc::kSuccess);
    EXPECT_EQ(areas->header.tag, n ? st::kSessions : st::kNoSessions);
    EXPECT_EQ(areas->handles, std::vector<uint32_t>{0x80000001});
    EXPECT_EQ(Bytes(areas->parameters.begin(), areas->parameters.end()), Bytes({0x00, 0x03, 0xaa, 0xbb, 0xcc, 0x01}));
    ASSERT_EQ(areas->sessions.size(), n);
    for (const AuthEntry& e : areas->sessions) {
      EXPECT_EQ(e.nonce.size(), 32u);
      EXPECT_EQ(e.attributes, attr::kContinueSession);
      EXPECT_EQ(e.hmac.size(), 32u);
    }
    auto handles = read_response_handles(frame, 1, kMax);
    ASSERT_TRUE(handles.ok());
    EXPECT_EQ(*handles, std::vector<uint32_t>{0x80000001});
  }
}

TEST(ResponseCodec, RefusesTruncatedAndOversized) {
  for (size_t sessions : {0, 1, 3}) {
    Bytes frame = sample_response(sessions);
    for (size_t n = 0; n < frame.size(); ++n) {
      Bytes cut(frame.begin(), frame.begin() + n);
      EXPECT_FALSE(read_response_areas(cut, 1, kMax).ok()) << "a prefix of " << n << " bytes";
      // The same prefix with its size field telling the truth: now a field
      // inside does not fit.
      if (n >= kFrameHeaderBytes) {
        store_be32(cut.data() + 2, static_cast<uint32_t>(n));
        auto r = read_response_areas(cut, 1, kMax);
        // The header, the handle, parameterSize and 6 bytes of parameters,
        // then entries of 69 bytes (a 32-byte nonce and hmac).
        constexpr size_t kEntries = kFrameHeaderBytes + 4 + 4 + 6, kEntry = 2 + 32 + 1 + 2 + 32;
        if (sessions == 0 && n >= kFrameHeaderBytes + 4) {
          EXPECT_TRUE(r.ok()) << "without sessions the parameters are the rest";
        } else if (sessions > 0 && n > kEntries && (n - kEntries) % kEntry == 0) {
          ASSERT_TRUE(r.ok()) << "cut after an entry: a frame with fewer";
          EXPECT_EQ(r->sessions.size(), (n - kEntries) / kEntry);
        } else {
          EXPECT_FALSE(r.ok()) << sessions << " sessions, " << n << " bytes";
          if (!r.ok()) EXPECT_EQ(r.error().kind(), ErrorKind::kParse);
        }
      }
    }
    EXPECT_FALSE(read_response_areas(frame, 1, frame.size() - 1).ok()) << "above max_size";
  }
}

TEST(ResponseCodec, RefusesInconsistentSizesAndAreas) {
  Bytes frame = sample_response(1);
  // parameterSize (after the handle) past the end of the frame.
  Bytes wide = frame;
  store_be32(wide.data() + kFrameHeaderBytes + 4, 0xFFFFFFF0);
  EXPECT_FALSE(read_response_areas(wide, 1, kMax).ok());
  // parameterSize covering everything: a session area with no session.
  Bytes none = frame;
  store_be32(none.data() + kFrameHeaderBytes + 4, static_cast<uint32_t>(frame.size() - kFrameHeaderBytes - 8));
  EXPECT_FALSE(read_response_areas(none, 1, kMax).ok());
  // Four entries: more than a command can carry.
  Bytes four = sample_response(3);
  Bytes extra = entry(0, 32, attr::kContinueSession, 32, false);
  four.insert(four.end(), extra.begin(), extra.end());
  store_be32(four.data() + 2, static_cast<uint32_t>(four.size()));
  EXPECT_FALSE(read_response_areas(four, 1, kMax).ok());
  EXPECT_TRUE(read_response_areas(four, 1, kMax, 4).ok()) << "the bound is the caller's";
  // A nonce longer than any digest.
  Bytes params = {0x00};
  Writer w;
  w.tpm2b(Bytes(65, 1), "nonce");
  w.u8(1);
  w.u16(0);
  Bytes long_nonce = *w.finish();
  const ByteView views[] = {long_nonce};
  auto forged = write_response_frame(rc::kSuccess, {}, params, views, kMax);
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(read_response_areas(*forged, 0, kMax).ok());
  // A tag that is neither TPM_ST_NO_SESSIONS nor TPM_ST_SESSIONS.
  Bytes tagged = frame;
  tagged[1] = 0xC4;
  EXPECT_FALSE(read_response_areas(tagged, 1, kMax).ok());
}

TEST(ResponseCodec, AnErrorIsItsHeaderAlone) {
  Bytes bare = error_frame(rc::kSessionMemory);
  auto areas = read_response_areas(bare, 1, kMax);
  ASSERT_TRUE(areas.ok());
  EXPECT_EQ(areas->header.code, rc::kSessionMemory);
  EXPECT_TRUE(areas->handles.empty());
  EXPECT_TRUE(areas->sessions.empty());
  EXPECT_FALSE(read_response_handles(bare, 1, kMax).ok());
  Bytes body = bare;
  body.insert(body.end(), {0, 0, 0, 1});
  store_be32(body.data() + 2, static_cast<uint32_t>(body.size()));
  EXPECT_FALSE(read_response_areas(body, 1, kMax).ok()) << "an error with a body";
}

TEST(FrameFields, StartAuthSession) {
  Writer w;
  w.tpm2b(Bytes(32, 7), "nonceCaller");
  w.tpm2b({}, "encryptedSalt");
  w.u8(se::kHmac);
  w.u16(alg::kAes);
  w.u16(128);
  w.u16(alg::kCfb);
  w.u16(alg::kSha256);
  Bytes params = *w.finish();
  StartAuthSessionRequest q = read_start_auth_session(params);
  EXPECT_TRUE(q.complete);
  EXPECT_EQ(q.nonce_caller.size(), 32u);
  EXPECT_TRUE(q.encrypted_salt.empty());
  EXPECT_EQ(q.session_type, se::kHmac);
  EXPECT_EQ(q.symmetric, alg::kAes);
  EXPECT_EQ(q.auth_hash, alg::kSha256);
  for (size_t n = 0; n < params.size(); ++n) {
    EXPECT_FALSE(read_start_auth_session(ByteView(params).first(n)).complete) << n;
  }
  EXPECT_FALSE(read_start_auth_session_nonce(Bytes{0x00, 0x41}).has_value()) << "a nonce longer than a digest";
  auto nonce = read_start_auth_session_nonce(Bytes{0x00, 0x02, 0xab, 0xcd});
  ASSERT_TRUE(nonce.has_value());
  EXPECT_EQ(nonce->size(), 2u);
}

TEST(FrameFields, ContextFlushAndListing) {
  Bytes context = {0, 0, 0, 0, 0, 0, 0, 9, 0x02, 0x00, 0x00, 0x01, 0xff};
  EXPECT_EQ(read_context_saved_handle(context), 0x02000001u);
  EXPECT_FALSE(read_context_saved_handle(ByteView(context).first(11)).has_value());
  EXPECT_EQ(read_flush_handle(Bytes{0x80, 0, 0, 2}), 0x80000002u);
  EXPECT_FALSE(read_flush_handle(Bytes{0x80, 0, 0}).has_value());

  HandleListing listing{1, {0x02000000, 0x02000001}};
  auto bytes = write_handle_listing(listing);
  ASSERT_TRUE(bytes.ok());
  auto back = read_handle_listing(*bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->more_data, 1);
  EXPECT_EQ(back->handles, listing.handles);
  for (size_t n = 0; n < bytes->size(); ++n) EXPECT_FALSE(read_handle_listing(ByteView(*bytes).first(n))) << n;
  Bytes lying = *bytes;
  lying[8] = 0x40;  // a count far above the handles present
  EXPECT_FALSE(read_handle_listing(lying).has_value());
  Bytes properties = *bytes;
  properties[4] = 0x06;  // TPM_CAP_TPM_PROPERTIES
  EXPECT_FALSE(read_handle_listing(properties).has_value());
}

TEST(FrameFields, WholeContext) {
  Bytes context = {0, 0, 0, 0, 0, 0, 0, 9, 0x02, 0x00, 0x00, 0x01, 0x40, 0, 0, 7, 0x00, 0x02, 0xaa, 0xbb};
  EXPECT_EQ(whole_context_saved_handle(context), 0x02000001u);
  for (size_t n = 0; n < context.size(); ++n) EXPECT_EQ(whole_context_saved_handle(ByteView(context).first(n)), 0u);
  Bytes longer = context;
  longer.push_back(0);
  EXPECT_EQ(whole_context_saved_handle(longer), 0u) << "a byte past the context";
}

// The handles an intermediary rewrites land where the codec reads them, and
// nothing is written where the frame has no such field.
TEST(FrameRewrite, HandlesWhereTheCodecReadsThem) {
  const uint32_t handles[] = {0x80000001, 0x80000002};
  Bytes command = *write_command_frame(cc::kPolicySecret, handles, {}, Bytes{0, 0, 0, 0}, kMax);
  ASSERT_TRUE(rewrite_handle(command, 1, 0x80ffffff).ok());
  auto areas = read_command_areas(command, kMax);
  ASSERT_TRUE(areas.ok()) << areas.error().message();
  EXPECT_EQ(areas->handles, (std::vector<uint32_t>{0x80000001, 0x80ffffff}));
  const Bytes before = command;
  EXPECT_FALSE(rewrite_handle(command, 1 + command.size() / 4, 1).ok()) << "past the frame";
  EXPECT_FALSE(rewrite_handle(MutableByteView(command).first(command.size() - 1), 0, 1).ok()) << "not framed";
  EXPECT_EQ(command, before);

  Bytes response = sample_response(0);
  ASSERT_TRUE(rewrite_handle(response, 0, 0x80abcdef).ok());
  EXPECT_EQ(read_response_handles(response, 1, kMax)->front(), 0x80abcdefu);

  Bytes flush = *write_command_frame(cc::kFlushContext, {}, {}, be32(0x80000003), kMax);
  ASSERT_TRUE(rewrite_flush_handle(flush, 0x80000004).ok());
  EXPECT_EQ(read_flush_handle(read_command_areas(flush, kMax)->parameters), 0x80000004u);
  EXPECT_FALSE(rewrite_flush_handle(command, 1).ok()) << "not a FlushContext";
  EXPECT_EQ(command, before);
}

// A frame off a stream: the header, then what its size says; a size below the
// header's or above the limit is refused before more is read.
TEST(FrameHeader, ReadStreamFrame) {
  Bytes stream = error_frame(rc::kFailure);
  stream.push_back(0x77);  // the next frame's first byte: never read
  size_t at = 0;
  auto reader = [&](MutableByteView into) -> Status {
    if (stream.size() - at < into.size()) return runtime_error("closed");
    std::copy_n(stream.begin() + static_cast<ptrdiff_t>(at), into.size(), into.begin());
    at += into.size();
    return ok_status();
  };
  auto frame = read_stream_frame(reader, kMax, "test");
  ASSERT_TRUE(frame.ok()) << frame.error().message();
  EXPECT_EQ(*frame, error_frame(rc::kFailure));
  EXPECT_EQ(at, kFrameHeaderBytes);

  stream = sample_response(1);
  at = 0;
  auto whole = read_stream_frame(reader, kMax, "test");
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  EXPECT_EQ(*whole, stream);
  at = 0;
  auto small = read_stream_frame(reader, stream.size() - 1, "test");
  ASSERT_FALSE(small.ok()) << "above the limit";
  EXPECT_EQ(small.error().kind(), ErrorKind::kParse);
  EXPECT_EQ(at, kFrameHeaderBytes) << "nothing read past the header";
  stream = {0x80, 0x01, 0, 0, 0, 9, 0, 0, 0, 0};
  at = 0;
  EXPECT_FALSE(read_stream_frame(reader, kMax, "test").ok()) << "below the header's own size";
}

TEST(FrameFields, NameInResponse) {
  Bytes name = {0x00, 0x0b};
  name.resize(34, 0x5a);
  Writer w;
  w.tpm2b(Bytes(10, 1), "outPublic");
  w.tpm2b(name, "name");
  w.tpm2b(name, "qualifiedName");
  Bytes params = *w.finish();
  EXPECT_EQ(name_in_response(cc::kReadPublic, params), name);
  EXPECT_FALSE(name_in_response(cc::kGetRandom, params).has_value()) << "not a name-bearing command";
  EXPECT_FALSE(name_in_response(cc::kReadPublic, ByteView(params).first(12 + 20)).has_value());
  Bytes short_name = {0x00, 0x04, 0x00, 0x0b, 1, 2};
  EXPECT_FALSE(name_in_response(cc::kLoad, short_name).has_value()) << "shorter than nameAlg and a SHA-1 digest";
}

TEST(CommandCodes, OneSpellingPerCode) {
  EXPECT_EQ(cc::kStartAuthSession, 0x176u);
  EXPECT_EQ(cc::kNvUndefineSpaceSpecial, 0x11Fu);
  EXPECT_EQ(cc::kPolicyTransportSPDM, 0x1A1u);
  EXPECT_EQ(&cmd::StartAuthSession::kInfo, find_command(cc::kStartAuthSession));
  EXPECT_EQ(find_command(cc::kPcrExtend)->name, "PCR_Extend");
}

// Every frame Tpm::run exchanged with the reference TPM, with and without an
// HMAC session, read by the codec and written back: the same bytes.
TEST(FrameCodecOnTheReferenceTpm, ReadAndWrittenBackUnchanged) {
  auto embedded = open_embedded();
  ASSERT_TRUE(embedded.ok()) << embedded.error().message();
  size_t seen = 0, with_sessions = 0;
  testing::RecordingTransport recording(**embedded, [&](ByteView command, const Result<Bytes>& response) {
    ASSERT_TRUE(response.ok());
    auto c = read_command_areas(command, kMaxCommandBytes);
    ASSERT_TRUE(c.ok()) << c.error().message();
    std::vector<ByteView> centries;
    for (const AuthEntry& e : c->sessions) centries.push_back(e.raw);
    auto cback = write_command_frame(c->info->code, c->handles, centries, c->parameters, kMaxCommandBytes);
    ASSERT_TRUE(cback.ok());
    EXPECT_EQ(*cback, Bytes(command.begin(), command.end())) << c->info->name;

    auto r = read_response_areas(*response, c->info->response_handle_count, kMax);
    ASSERT_TRUE(r.ok()) << c->info->name << ": " << r.error().message();
    if (r->header.code == rc::kSuccess) EXPECT_EQ(r->sessions.size(), c->sessions.size()) << c->info->name;
    Bytes rback;
    if (r->header.code == rc::kSuccess) {
      std::vector<ByteView> rentries;
      for (const AuthEntry& e : r->sessions) rentries.push_back(e.raw);
      rback = *write_response_frame(r->header.code, r->handles, r->parameters, rentries, kMax);
    } else {
      rback = error_frame(r->header.code);
    }
    EXPECT_EQ(rback, *response) << c->info->name;
    ++seen;
    if (!c->sessions.empty()) ++with_sessions;
  });
  Tpm tpm(recording);
  auto session = HmacSession::start(tpm, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.error().message();
  // GetRandom authorizes nothing: the session audits it.
  (*session)->set_attributes(attr::kContinueSession | attr::kAudit);
  Auth auth{session->get(), {}};
  auto random = tpm.run(cmd::GetRandom{16}, {auth});
  ASSERT_TRUE(random.ok()) << random.error().message();
  cmd::ReadPublic missing{NamedHandle::of(0x81ff0000)};
  EXPECT_FALSE(tpm.run(missing).ok()) << "an error response, read too";
  ASSERT_TRUE(tpm.run(cmd::PcrRead{}).ok());
  EXPECT_GE(seen, 4u);
  EXPECT_GE(with_sessions, 1u);
}

}  // namespace
}  // namespace tpmsec
