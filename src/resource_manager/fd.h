// The server's descriptors: the one owned-descriptor type (unique_fd.h).
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_FD_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_FD_H_

#include "tpmsec/unique_fd.h"

namespace tpmsec::server {

using Fd = UniqueFd;

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_FD_H_
