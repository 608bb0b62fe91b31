// A hub dataset id ("Org/Name") read from the local Hugging Face cache, as
// `datasets.load_dataset(id, split=…)` finds its data files: the hub cache's snapshot of
// datasets--Org--Name (io/model_source.h) holding parquet / jsonl / json files, the split chosen by
// file and directory names as `datasets` does (data_files.py's split patterns: the split name, or
// one of its keywords — train/training, validation/valid/dev/val, test/testing/eval/evaluation —
// delimited by [-._ 0-9] in a file name such as `data/train-00000-of-00001.parquet`, or a directory
// named after it). A snapshot with one data file and no split in its name is split "train".
// zerotune never downloads, and does not read `datasets`' own Arrow cache ($HF_DATASETS_CACHE).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace zt {

// The one data file of `split` of the cached hub dataset `id`. Throws zt::Error naming the id and
// where it looked when the dataset is not in the cache (saying how to fetch it, and whether only
// the Arrow cache has it), when no file of the snapshot is of `split` (listing the files), or when
// the split has several files (zerotune reads one file per split). `split_note` ends the message
// of a missing split (e.g. where the split name came from).
std::filesystem::path resolve_hub_dataset_file(const std::string& id, const std::string& split,
                                               std::string_view split_note = {});

// $HF_DATASETS_CACHE, else $HF_HOME/datasets, else ~/.cache/huggingface/datasets.
std::filesystem::path hf_datasets_cache_dir();

}  // namespace zt
