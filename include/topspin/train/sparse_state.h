// The sparse half of a model's training state: embedding tables updated
// row by row (DESIGN "Flat buffers": the tables stay out of the flat
// buffer). Each step the Task hands over, per micro-batch, the unique ids
// its forward gathered from each table and the gathered rows (leaves whose
// gradients backward fills); the trainer core then collects the row
// gradients (duplicates summed), sums them over ranks (SyncRows), divides
// and clips them with the dense gradient, and Step() applies row-wise
// Adagrad or lazy Adam (optim.sparse) to the touched rows only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/ddp/grad_sync.h"
#include "topspin/train/dense_state.h"
#include "topspin/train/flat_params.h"

namespace topspin {

class SparseState {
 public:
  // `tables`: the live tables [rows, dim] (the model's own storage).
  // `docs_per_rank`: the most documents one rank's batch holds (what
  // SyncRows needs to choose between a sparse and a dense exchange).
  SparseState(std::vector<at::Tensor> tables, const SparseOptimizer::Options& options,
              Comm* comm, int64_t docs_per_rank);

  size_t num_tables() const { return tables_.size(); }

  // After each micro-batch's forward: per table, its unique ids [U] and the
  // gathered rows [U, dim] (leaves that require grad).
  void Add(const std::vector<at::Tensor>& unique_ids, const std::vector<at::Tensor>& rows);
  // After the last forward, before its backward: the rows this rank will
  // put into the exchange (SparseRowCount), summed over ranks with the
  // step's totals so the row gather needs no size exchange.
  int64_t RowsToGather() const;
  // After backward: this rank's row gradients, duplicates summed.
  void Collect();
  // The row gradients summed over ranks; `sparse_rows[r]`: rank r's
  // RowsToGather(); `in_flight` runs while the rows are on the wire.
  void Sync(const std::vector<int64_t>& sparse_rows, const std::function<void()>& in_flight);
  // The step's row gradients (after Collect, and Sync with several ranks).
  std::vector<RowGrads>& rows() { return rows_; }
  // The row-wise update at learning rate lr.
  void Step(double lr);
  void set_optimizer_steps(int64_t steps);
  // Estimated memory traffic of this step's updates: each touched row read
  // by the gather, its gradient written, the row read and written by the
  // optimizer with its state vectors (lazy Adam: 2, row-wise Adagrad: ~0).
  double StepBytes() const;

  // table<c> and table<c>.opt<i>, on the host (every rank holds them whole).
  NamedTensors Gather();
  void Load(const SafetensorsFile& file);
  void LoadParameters(const SafetensorsFile& file);  // the tables only

 private:
  std::vector<at::Tensor> tables_;
  std::vector<SparseOptimizer> optimizers_;
  Comm* comm_;
  int64_t docs_per_rank_;
  std::vector<int64_t> table_rows_;
  double row_state_vectors_;
  std::vector<std::vector<at::Tensor>> ids_, leaves_;  // this step's micro-batches, per table
  std::vector<RowGrads> rows_;
};

}  // namespace topspin
