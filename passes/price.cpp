// See price.h.
#include "passes/price.h"

#include <cmath>

namespace aicf {

bool takeForm(const Price &form, const Price &base, double clearly) {
  if (!std::isfinite(form.us) || form.us < 0)
    return false;
  if (!std::isfinite(base.us) || base.us < 0)
    return true;
  bool fewerBytes = form.bytes > 0 && base.bytes > 0 && form.bytes < base.bytes;
  return form.us < clearly * base.us || (fewerBytes && form.us * kTimeBand <= base.us);
}

} // namespace aicf
