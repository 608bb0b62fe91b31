// The data-file patterns of HF `datasets` (datasets/data_files.py), on a local directory: the glob
// syntax of `data_files` (fsspec's `glob`, utils.glob_translate), which of the matched files
// `resolve_pattern` keeps, and the split patterns `get_data_patterns` tries on a directory that
// names none. Paths are relative to the directory the patterns are resolved in, '/'-separated.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zt {

// `datasets.naming._split_re`, ^\w+(\.\w+)*$: letters, digits and '_', parts joined by '.' (a
// byte >= 0x80 counts as a letter, as Python's \w takes most non-ASCII characters).
bool valid_split_name(std::string_view s);

// True when `pattern` holds a glob character (Python glob.has_magic: '*', '?' or '[').
bool has_glob_magic(std::string_view pattern);

// True when the relative path `path` matches `pattern` as fsspec's glob matches it
// (fsspec.utils.glob_translate): '*' is any run of characters but '/', '?' one such character,
// '[abc]' / '[a-z]' / '[!abc]' a class ('[' unclosed: a literal '['), a whole component '**' any
// number of components (zero or more inside the pattern, one or more at its end). A leading dot is
// matched like any character (resolve_data_pattern drops hidden paths afterwards). Throws zt::Error
// for '**' that is part of a component ("a**b"), which fsspec refuses ("Invalid pattern: '**' can
// only be an entire path component").
bool glob_matches(std::string_view pattern, std::string_view path);

// The files of `files` (relative paths, sorted) that `datasets.data_files.resolve_pattern` keeps
// for `pattern`: those glob_matches accepts, except a hidden one (a component starting with '.') or
// one inside a directory starting with "__" unless the pattern names as many such components, and
// README.md, config.json, dataset_info.json, dataset_infos.json, dummy_data.zip and
// dataset_dict.json unless the pattern's last component is that name. Order: that of `files`.
std::vector<std::string> resolve_data_pattern(std::string_view pattern,
                                              const std::vector<std::string>& files);

// `datasets.data_files.get_data_patterns` on a directory whose files are `files` (relative,
// sorted): split name -> its patterns, for the first rule that finds a file: (1) the hub's sharded
// names `data/{split}-00000-of-00001*.*`, one split per name; (2) a directory named by a split
// keyword (train/training, validation/valid/dev/val, test/testing/eval/evaluation, alone or
// delimited by [-._ 0-9]); (3) a file name with such a keyword; (4) every file, split "train".
// Empty when the directory has no file. Throws zt::Error when a sharded name's split is not a valid
// split name (`datasets`: "Split name should match '^\w+(\.\w+)*$'").
std::vector<std::pair<std::string, std::vector<std::string>>> default_split_patterns(
    const std::vector<std::string>& files);

}  // namespace zt
