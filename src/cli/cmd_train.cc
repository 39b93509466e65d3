// topspin train CONFIG [--set k=v]... [--run-dir DIR] [--resume auto|PATH [--extend]]
// [--init-from CHECKPOINT]
// [--nproc N] [--nnodes M --node-rank K --master-addr HOST --master-port P]:
// trains the config's model.kind (ranker or gpt) through the trainer core;
// the work is in cli/train_job.cc. Without
// --run-dir a new numbered run directory <run.dir>/<run.name>-NNN is made
// (with the resolved config); --resume auto continues the newest complete
// checkpoint of --run-dir (with --extend: past a raised train.steps);
// --init-from CHECKPOINT starts a new run from a checkpoint's weights.
//
// Distributed (docs/DISTRIBUTED.md): the job layer (topspin/dist/job.h)
// decides this process's role. With --nproc N (or --nnodes M) it is the
// launcher: it spawns the local ranks running the same command, supervises
// them and exits non-zero naming the first rank that failed. A process
// started by torchrun, srun, mpirun or SageMaker is a rank already and
// needs --run-dir shared by all ranks.
#include "cli/commands.h"
#include "cli/train_job.h"

namespace topspin::cli {

void RegisterTrain(CLI::App& app) {
  static TrainArgs args;
  auto* cmd = app.add_subcommand("train", "Train the model of a config (model.kind: ranker or gpt)");
  cmd->add_option("CONFIG", args.path, "YAML config (configs/ranker-shop.yaml)")->required();
  cmd->add_option("--set", args.overrides, "override a key: --set data.train=DIR (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", args.job.run_dir,
                  "write into this directory (default: a new "
                  "<run.dir>/<run.name>-NNN)");
  cmd->add_option("--resume", args.job.resume,
                  "auto: continue the newest complete checkpoint of --run-dir; or a step-N dir");
  cmd->add_flag("--extend", args.extend,
               "with --resume: train a run on past its train.steps (raise it with --set "
               "train.steps=N); the schedule becomes the one over the new steps");
  cmd->add_option("--init-from", args.init_from,
                  "start a new run from this checkpoint's weights (a run dir or step-N dir); "
                  "optimizer state, step and schedule start fresh");
  cmd->add_option("--nproc", args.job.nproc, "ranks on this host (default dist.nproc)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nnodes", args.job.nnodes, "hosts in the job (run this command on each)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank", args.job.node_rank, "this host's index, 0 .. nnodes-1")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--master-addr", args.job.master_addr, "host of rank 0 (several hosts)")
      ->capture_default_str();
  cmd->add_option("--master-port", args.job.master_port, "rendezvous port on --master-addr")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_flag("--tune", args.tune,
                "run the AutoTuner first (topspin tune; instant when its cache has this "
                "machine and workload) and train with its settings");
  AddTuneOptions(cmd, args.tune_args, "tune-");
  cmd->callback([] { RunTrainJob(args); });
}

}  // namespace topspin::cli
