// Python's float % (CPython float_rem), as zerotune's copies of Python formulas use it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/python_float.h"

namespace {

using zt::python_float_mod;

// The values Python 3 prints for these expressions.
TEST(PythonFloat, ModHasTheDivisorsSign) {
  EXPECT_EQ(python_float_mod(-0.25, 1.0), 0.75);  // -0.25 % 1.0
  EXPECT_EQ(python_float_mod(2.75, 1.0), 0.75);   // 2.75 % 1.0
  EXPECT_EQ(python_float_mod(0.5, -1.0), -0.5);   // 0.5 % -1.0
  EXPECT_EQ(python_float_mod(-1e-20, 1.0), 1.0);  // the moved remainder rounds to the divisor
  EXPECT_EQ(python_float_mod(-3.0, 1.0), 0.0);    // -3.0 % 1.0 is 0.0, not -0.0
  EXPECT_FALSE(std::signbit(python_float_mod(-3.0, 1.0)));
  EXPECT_TRUE(std::signbit(python_float_mod(3.0, -1.0)));  // 3.0 % -1.0 is -0.0
  EXPECT_EQ(python_float_mod(-1.5 * (1.0 / 37.0), 1.0), 1.0 + std::fmod(-1.5 * (1.0 / 37.0), 1.0));
}

}  // namespace
