#include <gtest/gtest.h>

#include "core/error.h"

TEST(Error, FailFormatsTheMessage) {
  try {
    zt::fail("{}:{}: expected {}", "a.jsonl", 3, "an object");
    FAIL() << "zt::fail returned";
  } catch (const zt::Error& e) {
    EXPECT_STREQ(e.what(), "a.jsonl:3: expected an object");
  }
}
