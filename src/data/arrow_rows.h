// The Arrow table → rows step shared by the parquet and CSV readers (rows_parquet.cpp).
#pragma once

#include <arrow/table.h>

#include <memory>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt::data {

// One ordered JSON object per row of `table`, keys in column order (string, integer, float, bool,
// null, list, struct, map and dictionary columns; a column of another type is left out with a
// note and, when `left_out` is given, named there as "NAME (TYPE)"). Throws zt::Error naming
// `file`: a column name given twice, invalid UTF-8 in a string (with its row and column).
std::vector<Json> arrow_table_rows(const std::shared_ptr<arrow::Table>& table,
                                   const std::string& file, std::vector<std::string>* left_out);

}  // namespace zt::data
