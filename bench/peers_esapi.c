/* Protected PCR extends through tpm2-tss ESAPI against a TPM reached through a
 * TCTI string (bench/peers runs it against `tpmsec emulate`):
 *
 *   peers_esapi MODE TCTI N
 *
 * MODE (every digest is SHA-256("tpmsec peers" || i), into PCR 16):
 *   esapi       one ESAPI program: CreatePrimary of the null-hierarchy ECC
 *               P-256 key (the template of Linux's drivers/char/tpm/tpm2-sessions.c,
 *               as bench/esapi_peer.cc), one HMAC session salted with it
 *               (AES-128-CFB, SHA-256, continueSession), N Esys_PCR_Extend with
 *               it, then both flushed.
 *   linux-6.10  the kernel's sequence (drivers/char/tpm/tpm2-sessions.c, v6.10):
 *               at "boot" CreatePrimary of the null key, ContextSave, FlushContext;
 *               then per extend ContextLoad of the key, StartAuthSession salted to
 *               it, FlushContext of the key, PCR_Extend in the session without
 *               continueSession (the TPM ends the session with the command).
 *   linux-6.12  the same boot; the first extend loads the key and starts the
 *               session as 6.10 does, every extend sets continueSession and later
 *               ones reuse the session ("tpm: Lazily flush the auth session",
 *               df745e25098d, in v6.12-rc5: the session stays until user space
 *               writes to /dev/tpm*, a suspend or the driver's removal).
 *   systemd-252 what one systemd-pcrphase run of systemd 252 sends (its src/boot/pcrphase.c and
 *               src/shared/tpm2-util.c; bench/peers saw the same sequence from the real
 *               binary): Startup(CLEAR) (TPM_RC_INITIALIZE accepted), GetCapability(PCRS),
 *               one PCR_Read per allocated bank (tpm2_get_good_pcr_banks), one
 *               PCR_Extend of PCR 11 in the SHA-1 and SHA-256 banks with a password
 *               session; N times (each is one process of systemd's).
 * N = 0 runs the set-up only (the kernel's boot-time part). Exit 1 with one
 * line on any failure, 2 on bad usage.
 *
 * Built on its own against libtss2 (bench/peers does it):
 *   cc -O2 bench/peers_esapi.c $(pkg-config --cflags --libs tss2-esys tss2-tctildr tss2-rc) -lcrypto
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

static void check(TSS2_RC rc, const char* what) {
  if (rc != TSS2_RC_SUCCESS) {
    fprintf(stderr, "peers_esapi: %s: %s\n", what, Tss2_RC_Decode(rc));
    exit(1);
  }
}

static ESYS_TR create_null_key(ESYS_CONTEXT* esys) {
  TPM2B_PUBLIC in_public = {0};
  TPMT_PUBLIC* p = &in_public.publicArea;
  p->type = TPM2_ALG_ECC;
  p->nameAlg = TPM2_ALG_SHA256;
  p->objectAttributes = 0x00030472; /* fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|noDA|restricted|decrypt */
  p->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
  p->parameters.eccDetail.symmetric.keyBits.aes = 128;
  p->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
  p->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
  p->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
  p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
  TPM2B_SENSITIVE_CREATE in_sensitive = {0};
  TPM2B_DATA outside_info = {0};
  TPML_PCR_SELECTION creation_pcr = {0};
  ESYS_TR primary = ESYS_TR_NONE;
  TPM2B_PUBLIC* out_public = NULL;
  TPM2B_CREATION_DATA* creation_data = NULL;
  TPM2B_DIGEST* creation_hash = NULL;
  TPMT_TK_CREATION* creation_ticket = NULL;
  check(Esys_CreatePrimary(esys, ESYS_TR_RH_NULL, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_sensitive,
                           &in_public, &outside_info, &creation_pcr, &primary, &out_public, &creation_data,
                           &creation_hash, &creation_ticket),
        "Esys_CreatePrimary");
  Esys_Free(out_public);
  Esys_Free(creation_data);
  Esys_Free(creation_hash);
  Esys_Free(creation_ticket);
  return primary;
}

static ESYS_TR start_salted_session(ESYS_CONTEXT* esys, ESYS_TR key, int keep) {
  TPMT_SYM_DEF symmetric = {0};
  symmetric.algorithm = TPM2_ALG_AES;
  symmetric.keyBits.aes = 128;
  symmetric.mode.aes = TPM2_ALG_CFB;
  ESYS_TR session = ESYS_TR_NONE;
  check(Esys_StartAuthSession(esys, key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, TPM2_SE_HMAC,
                              &symmetric, TPM2_ALG_SHA256, &session),
        "Esys_StartAuthSession");
  check(Esys_TRSess_SetAttributes(esys, session, keep ? TPMA_SESSION_CONTINUESESSION : 0, 0xff),
        "Esys_TRSess_SetAttributes");
  return session;
}

static void extend(ESYS_CONTEXT* esys, ESYS_TR session, long i) {
  unsigned char in[16] = "tpmsec peers";
  in[12] = (unsigned char)(i >> 24);
  in[13] = (unsigned char)(i >> 16);
  in[14] = (unsigned char)(i >> 8);
  in[15] = (unsigned char)i;
  TPML_DIGEST_VALUES values = {0};
  values.count = 1;
  values.digests[0].hashAlg = TPM2_ALG_SHA256;
  SHA256(in, sizeof(in), values.digests[0].digest.sha256);
  check(Esys_PCR_Extend(esys, ESYS_TR_PCR16, session, ESYS_TR_NONE, ESYS_TR_NONE, &values), "Esys_PCR_Extend");
}

static void systemd_252(ESYS_CONTEXT* esys, long i) {
  TSS2_RC rc = Esys_Startup(esys, TPM2_SU_CLEAR);
  if (rc != TPM2_RC_INITIALIZE) check(rc, "Esys_Startup");
  TPMI_YES_NO more = TPM2_NO;
  TPMS_CAPABILITY_DATA* caps = NULL;
  check(Esys_GetCapability(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_PCRS, 0, 1, &more, &caps),
        "Esys_GetCapability(PCRS)");
  TPML_DIGEST_VALUES values = {0};
  for (UINT32 b = 0; b < caps->data.assignedPCR.count; ++b) {
    TPMS_PCR_SELECTION* bank = &caps->data.assignedPCR.pcrSelections[b];
    TPML_PCR_SELECTION sel = {0};
    sel.count = 1;
    sel.pcrSelections[0] = *bank;
    UINT32 update = 0;
    TPML_PCR_SELECTION* out_sel = NULL;
    TPML_DIGEST* out = NULL;
    check(Esys_PCR_Read(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &sel, &update, &out_sel, &out),
          "Esys_PCR_Read");
    Esys_Free(out_sel);
    Esys_Free(out);
    if (bank->hash == TPM2_ALG_SHA1 || bank->hash == TPM2_ALG_SHA256) {
      unsigned char word[16] = "tpmsec peers";
      word[15] = (unsigned char)i;
      values.digests[values.count].hashAlg = bank->hash;
      SHA256(word, sizeof(word), values.digests[values.count].digest.sha256); /* SHA-1 takes the first 20 bytes */
      ++values.count;
    }
  }
  Esys_Free(caps);
  check(Esys_PCR_Extend(esys, ESYS_TR_PCR11, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &values), "Esys_PCR_Extend");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: peers_esapi esapi|linux-6.10|linux-6.12|systemd-252 TCTI N\n");
    return 2;
  }
  const char* mode = argv[1];
  int linux_mode = 0; /* 0: esapi, 10: 6.10, 12: 6.12, -1: systemd 252 */
  if (strcmp(mode, "linux-6.10") == 0) {
    linux_mode = 10;
  } else if (strcmp(mode, "linux-6.12") == 0) {
    linux_mode = 12;
  } else if (strcmp(mode, "systemd-252") == 0) {
    linux_mode = -1;
  } else if (strcmp(mode, "esapi") != 0) {
    fprintf(stderr, "peers_esapi: unknown mode '%s' (esapi, linux-6.10, linux-6.12, systemd-252)\n", mode);
    return 2;
  }
  char* end = NULL;
  long n = strtol(argv[3], &end, 10);
  if (*argv[3] == '\0' || *end != '\0' || n < 0 || n > 100000) {
    fprintf(stderr, "peers_esapi: N must be 0..100000\n");
    return 2;
  }
  TSS2_TCTI_CONTEXT* tcti = NULL;
  check(Tss2_TctiLdr_Initialize(argv[2], &tcti), "Tss2_TctiLdr_Initialize");
  ESYS_CONTEXT* esys = NULL;
  check(Esys_Initialize(&esys, tcti, NULL), "Esys_Initialize");

  if (linux_mode < 0) {
    for (long i = 0; i < n; ++i) systemd_252(esys, i);
  } else if (linux_mode == 0) {
    ESYS_TR primary = create_null_key(esys);
    ESYS_TR session = start_salted_session(esys, primary, 1);
    for (long i = 0; i < n; ++i) extend(esys, session, i);
    check(Esys_FlushContext(esys, session), "Esys_FlushContext(session)");
    check(Esys_FlushContext(esys, primary), "Esys_FlushContext(primary)");
  } else {
    /* Boot: tpm2_sessions_init() creates the null key, saves its context, flushes it. */
    ESYS_TR primary = create_null_key(esys);
    TPMS_CONTEXT* saved = NULL;
    check(Esys_ContextSave(esys, primary, &saved), "Esys_ContextSave");
    check(Esys_FlushContext(esys, primary), "Esys_FlushContext(null key)");
    ESYS_TR session = ESYS_TR_NONE;
    for (long i = 0; i < n; ++i) {
      if (session == ESYS_TR_NONE) {
        /* tpm2_start_auth_session(): tpm2_load_null(), StartAuthSession, flush the key. */
        ESYS_TR key = ESYS_TR_NONE;
        check(Esys_ContextLoad(esys, saved, &key), "Esys_ContextLoad");
        session = start_salted_session(esys, key, linux_mode == 12);
        check(Esys_FlushContext(esys, key), "Esys_FlushContext(null key)");
      }
      extend(esys, session, i);
      if (linux_mode == 10) {
        /* continueSession clear: the TPM flushed the session with the response. */
        Esys_TR_Close(esys, &session);
        session = ESYS_TR_NONE;
      }
    }
    /* 6.12's session stays in the TPM after the last extend (flushed lazily,
     * not per extend): the measurement ends here, as the kernel's would. */
    Esys_Free(saved);
  }
  Esys_Finalize(&esys);
  Tss2_TctiLdr_Finalize(&tcti);
  return 0;
}
