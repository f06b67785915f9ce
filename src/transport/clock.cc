#include "tpmsec/transport/clock.h"

namespace tpmsec {

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

}  // namespace tpmsec
