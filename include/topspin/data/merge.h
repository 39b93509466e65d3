// topspin dataset merge: the parts of a convert (`topspin convert --part
// K/N`, one per process or Spark executor) -> one dataset.
//
// The parts must be all N of one input list (same fingerprint), with the
// same schema, label, group column and tokenizer; a missing, repeated or
// foreign part is Error kData naming it. The merged dataset holds the
// parts' shards in part order, renamed shard-00000... (hard links when the
// output is on the same filesystem, else copies; the parts stay as they
// are), and one manifest whose statistics are merged from the parts'
// builder states: counts, nulls, min and max exactly, mean and std by
// Chan's pairwise update (equal to a single convert's to rounding), and
// quantile edges from the same deterministic sample a single convert takes
// (the sample is keyed by each row's input and position, not by its global
// index). Row groups end where input files end, so the rows, groups, row
// groups and hence the pipeline's sample order are those of a single
// convert of the same input. A group whose rows are in two parts is Error
// kData naming both input files.
#pragma once

#include <filesystem>
#include <vector>

#include "topspin/data/manifest.h"

namespace topspin {

struct MergeOptions {
  std::vector<std::filesystem::path> parts;  // part dataset directories, any order
  std::filesystem::path out;                 // must not exist
  std::string created_by;
};

// Writes the merged dataset (atomically: <out>.incomplete/ until done) and
// returns its manifest.
Manifest MergeParts(const MergeOptions& options);

}  // namespace topspin
