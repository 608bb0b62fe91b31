// Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
// used for every string the dataset readers produce. The one implementation lives with the
// tokenizer (text/unicode.h): the byte offset of the first byte that starts an invalid or
// truncated sequence, or nullopt when all of the string is valid.
#pragma once

#include "text/unicode.h"

namespace zt::data {

using text::unicode::find_invalid_utf8;

}  // namespace zt::data
