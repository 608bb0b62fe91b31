// Python's float arithmetic where it differs from C's, for formulas copied from Python sources.
#pragma once

#include <cmath>

namespace zt {

// Python's `x % y` of floats (CPython float_rem): std::fmod's remainder moved to the sign of the
// divisor `y` (fmod's has the sign of `x`), a zero remainder signed as `y`. The moved remainder
// rounds like Python's: -1e-20 % 1.0 is 1.0. y == 0 is the caller's to exclude (Python raises
// ZeroDivisionError); here it gives NaN.
inline double python_float_mod(double x, double y) {
  double m = std::fmod(x, y);
  if (m == 0.0) return std::copysign(0.0, y);
  if ((y < 0) != (m < 0)) m += y;
  return m;
}

}  // namespace zt
