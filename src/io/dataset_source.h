// A hub dataset id ("Org/Name") read from the local Hugging Face cache, as
// `datasets.load_dataset(<snapshot dir>, split=…)` finds its data files (load.py
// LocalDatasetModuleFactory): the hub cache's snapshot of datasets--Org--Name
// (io/model_source.h); its dataset card's `configs` (io/dataset_card.h) choose the default config,
// whose `data_dir` and `data_files` patterns (io/data_files_pattern.h) give each split's files;
// without `configs` (or without data_files in the config) the file-name rules of
// `get_data_patterns` do: the hub's sharded names `data/{split}-00000-of-00001.parquet`, a
// directory or file named by a split keyword (train/training, validation/valid/dev/val,
// test/testing/eval/evaluation, delimited by [-._ 0-9]), else every file as split "train".
// zerotune never downloads, and does not read `datasets`' own Arrow cache ($HF_DATASETS_CACHE).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace zt {

// The one data file of `split` of the cached hub dataset `id`. Throws zt::Error naming the id and
// where it looked when the dataset is not in the cache (saying how to fetch it, and whether only
// the Arrow cache has it); for a malformed card (io/dataset_card.h), several configs and no
// default (`datasets`: "Config name is missing"), two defaults, a default config with reading
// options zerotune does not apply (columns, features, …); when the split is not one of the
// config's (listing them and the data files), a plain data_files path is missing, the split has
// several files (zerotune reads one file per split), only files of formats zerotune does not read,
// or one shard of several. `split_note` ends the message of a missing split (e.g. where the split
// name came from).
std::filesystem::path resolve_hub_dataset_file(const std::string& id, const std::string& split,
                                               std::string_view split_note = {});

// $HF_DATASETS_CACHE, else $HF_HOME/datasets, else ~/.cache/huggingface/datasets.
std::filesystem::path hf_datasets_cache_dir();

}  // namespace zt
