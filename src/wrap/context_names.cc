// CommandWrapper's Names of saved object contexts (wrap.h). A caller that
// saves an object's context (tpm2-tools' `-c file.ctx`) and loads it again
// later, in this process or the next, gets a new handle whose Name would be
// read from whatever the TPM loaded: an interposer that rewrites the
// ContextLoad's context chooses that object, and the audited read
// authenticates its Name. A context whose object's Name the wrapper's
// session authenticated when the caller saved it names that object when it
// is loaded again: a context swapped on the bus then loads an object the TPM
// refuses under that Name (cpHash). The first Name noted for a context
// stays (a replayed context given as another object's ContextSave answer
// does not rename it); at most kMaxContextNames are kept, the oldest dropped.
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wrap.h"
#include "wrap/wrap_state.h"

namespace tpmsec {
namespace {

constexpr size_t kMaxContextNames = 256;

Bytes context_digest(ByteView context) {
  auto digest = crypto::hash(alg::kSha256, {context});
  return digest.ok() ? std::move(*digest) : Bytes();
}

}  // namespace

void CommandWrapper::note_context_command(Pending& p, uint32_t code, const std::vector<uint32_t>& handles,
                                          ByteView parameters) {
  if (code == cc::kContextSave && handles.size() == 1 && (handles[0] >> 24) == ht::kTransient) {
    p.saved_object = handles[0];
  }
  if (code == cc::kContextLoad) p.loaded_context = context_digest(parameters);
}

// ContextSave's answer: the TPMS_CONTEXT, its parameters (without a
// session area).
void CommandWrapper::note_saved_context(const Pending& p, ByteView response) {
  if (!p.saved_object) return;
  auto saved = read_response_areas(response, 0, response.size());
  if (!saved.ok() || !saved->sessions.empty() || saved->parameters.empty()) return;
  auto name = names_.find(p.saved_object);
  if (name == names_.end()) return;
  Bytes digest = context_digest(saved->parameters);
  if (digest.empty() || !context_names_.emplace(digest, name->second).second) return;
  context_order_.push_back(std::move(digest));
  if (context_order_.size() > kMaxContextNames) {
    context_names_.erase(context_order_.front());
    context_order_.pop_front();
  }
}

// ContextLoad's new handle: the Name noted for its context, or none (read
// again, audited, before a command names it).
void CommandWrapper::name_loaded_context(const Pending& p, uint32_t handle) {
  auto name = p.loaded_context.empty() ? context_names_.end() : context_names_.find(p.loaded_context);
  if ((handle >> 24) == ht::kTransient && name != context_names_.end()) {
    names_[handle] = name->second;
  } else {
    names_.erase(handle);
  }
}

}  // namespace tpmsec
