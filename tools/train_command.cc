// `ember train`: trains a CTR model and reports test AUC and logloss.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/trace.h"
#include "engine/bundle.h"
#include "engine/model_hash.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "ops/precision.h"
#include "scheduler/plan.h"
#include "scheduler/resource_graph.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/job_flags.h"
#include "tools/job_ranks.h"
#include "tools/plan_flags.h"
#include "tools/run_curves.h"
#include "tools/serving_flags.h"
#include "tools/stop_signals.h"
#include "tools/train_data.h"
#include "tools/train_report.h"
#include "tools/train_flags.h"

namespace {
bool IsPositive32(const char*, int32_t value) { return value > 0; }
bool IsNonNegative64(const char*, int64_t value) { return value >= 0; }
bool IsFraction(const char*, double value) { return value > 0 && value < 1; }
bool IsRatio(const char*, double value) { return value >= 0 && value <= 1; }
bool IsNonNegativeDouble(const char*, double value) { return value >= 0; }
bool IsPositive64(const char*, int64_t value) { return value > 0; }
bool IsNonNegative32(const char*, int32_t value) { return value >= 0; }
bool IsAutoOrNonNegative64(const char*, int64_t value) { return value >= -1; }
bool IsPositiveDouble(const char*, double value) { return value > 0; }
}  // namespace

DEFINE_string(train_data, "",
              "Files to train on, comma-separated (glob patterns allowed), in --format (text "
              "may be .gz). Empty: generate --rows examples from a planted model (see "
              "gen-data) and train on those.");
DEFINE_string(test_data, "",
              "Files to evaluate on, like --train_data. Empty: hold out the last "
              "--test_fraction of the training data.");
DEFINE_double(test_fraction, 0.2,
              "Fraction of the training data (its last examples) held out for evaluation "
              "when --test_data is empty.");
DEFINE_validator(test_fraction, &IsFraction);
DEFINE_string(model, "dlrm",
              "Model to train: dlrm, deepfm, wide_deep, dcn_v2, mmoe (multi-task) or moe "
              "(sparse mixture of experts; see engine/model_zoo.h).");
DEFINE_int32(num_experts, 4,
             "--model=mmoe: experts shared by the tasks; --model=moe: experts the examples "
             "are routed among.");
DEFINE_validator(num_experts, &IsPositive32);
DEFINE_int32(moe_top_k, 2,
             "--model=moe: experts each example is routed to (the gate's top k), 1 to "
             "--num_experts.");
DEFINE_validator(moe_top_k, &IsPositive32);
DEFINE_double(moe_capacity_factor, 1.25,
              "--model=moe: an expert's buffer holds ceil(factor * k * batch / experts) "
              "examples per step; choices past it are dropped (counted). > 0, at most 64.");
DEFINE_string(moe_expert_mlp, "",
              "--model=moe: comma-separated widths of each expert's MLP (they replace the top "
              "MLP's hidden layers); empty: those of --top_mlp.");
DEFINE_double(moe_aux_loss_weight, 0.01,
              "--model=moe: weight of the auxiliary load-balancing loss (GShard/Switch: "
              "experts x sum of dispatch fraction x mean gate probability, 1 when uniform); "
              "0 turns it off.");
DEFINE_string(moe_gate_input, "interaction",
              "--model=moe: what the gate reads: interaction (the interaction's output, which "
              "the experts read too) or bottom (the bottom MLP's output over the dense features "
              "alone; needs dense features). Default interaction.");
DEFINE_string(expert_mlp, "256,64",
              "--model=mmoe: comma-separated widths of each expert's MLP; the tasks' gates mix "
              "the last.");
DEFINE_int32(cross_layers, 3, "--model=dcn_v2: cross layers before the MLP.");
DEFINE_validator(cross_layers, &IsNonNegative32);
DEFINE_int32(cross_rank, 0,
             "--model=dcn_v2: rank of each cross layer's weight (U V^T); 0: full rank.");
DEFINE_validator(cross_rank, &IsNonNegative32);
DEFINE_int32(embedding_dim, 16, "Floats per embedding row.");
DEFINE_validator(embedding_dim, &IsPositive32);
DEFINE_string(bottom_mlp, "512,256,64",
              "dlrm: bottom MLP widths after the dense input; a last layer to --embedding_dim "
              "is added when the last width differs from it.");
DEFINE_string(top_mlp, "512,256",
              "MLP widths before the final logit (dlrm's top MLP, the deep part of the other "
              "models).");
DEFINE_int32(batch_size, 256, "Examples per training step.");
DEFINE_validator(batch_size, &IsPositive32);
DEFINE_int32(epochs, 1, "Passes over the training data.");
DEFINE_validator(epochs, &IsPositive32);
DEFINE_int64(max_steps, 0, "Stop after this many training steps; 0 means no limit.");
DEFINE_validator(max_steps, &IsNonNegative64);
DEFINE_int64(timing_warmup_steps, 3,
             "Training steps at the start left out of the steady-state samples/s (the train "
             "line's 'after the first N steps', train.steady_samples_per_sec in --metrics_out): "
             "they carry one-time costs such as kernel generation. They train like any other.");
DEFINE_validator(timing_warmup_steps, &IsNonNegative64);
DEFINE_string(sparse_optimizer, "adagrad",
              "Embedding optimizer: sgd, adagrad, rowwise_adagrad (one accumulator per row), "
              "adam (lazy: per-row step count) or ftrl (FTRL-Proximal; --sparse_lr is its "
              "alpha).");
DEFINE_double(sparse_lr, 0.05, "Embedding learning rate (FTRL: alpha).");
DEFINE_double(ftrl_beta, 1.0, "FTRL-Proximal beta (learning-rate smoothing).");
DEFINE_validator(ftrl_beta, &IsNonNegativeDouble);
DEFINE_double(ftrl_l1, 0.0, "FTRL-Proximal L1 regularisation; > 0 makes rows sparse.");
DEFINE_validator(ftrl_l1, &IsNonNegativeDouble);
DEFINE_double(ftrl_l2, 0.0, "FTRL-Proximal L2 regularisation.");
DEFINE_validator(ftrl_l2, &IsNonNegativeDouble);
DEFINE_string(admission, "none",
              "Which keys get an embedding row: none (every key on first sight), frequency "
              "(after --admission_min_count pulls, counted in a count-min sketch) or "
              "probability (each pull admits with --admission_probability). A key not yet "
              "admitted reads as zeros and its gradient is dropped.");
DEFINE_int64(admission_min_count, 2, "With --admission=frequency: pulls before a row is made.");
DEFINE_validator(admission_min_count, &IsPositive64);
DEFINE_double(admission_probability, 0.5,
              "With --admission=probability: chance that a pull of a new key admits it.");
DEFINE_validator(admission_probability, &IsRatio);
DEFINE_int64(embedding_ttl_steps, 0,
             "Evict embedding rows not pulled for this many steps; 0 keeps every row.");
DEFINE_validator(embedding_ttl_steps, &IsNonNegative64);
DEFINE_string(embedding_memory_budget, "",
              "Bytes the embedding tables may hold in memory (e.g. 512MB, 8GB), counting "
              "vectors, optimizer state and index; rows beyond it are written back to a "
              "RocksDB tier in --embedding_dir. Empty: everything in memory, no disk tier.");
DEFINE_string(embedding_eviction, "lfu",
              "With --embedding_memory_budget: which rows leave memory first, lfu (least "
              "often pulled, sampled among 8) or lru (least recently pulled). Changes speed, "
              "never values. lfu keeps more of a skewed stream's hot rows: DLRM at a 10% "
              "budget read 24% fewer rows from disk and trained 16-18% faster than with lru.");
DEFINE_string(embedding_dir, "",
              "Directory of the embedding disk tier. Empty: a fresh temporary directory, "
              "removed when the run ends.");
DEFINE_int64(embedding_reserve_rows, -1,
             "Embedding rows to make room for before the first step, so that the steps do "
             "not fault in memory or grow the key index for new rows. -1: for data loaded "
             "into memory, without --embedding_memory_budget or --admission, its distinct "
             "keys (estimated) plus 2%. 0: none. N > 0: N rows.");
DEFINE_validator(embedding_reserve_rows, &IsAutoOrNonNegative64);
DEFINE_bool(prefetch, true,
            "With a disk tier, load the rows of the next batch while the current one trains.");
DEFINE_bool(read_ahead, true,
            "--pipeline=off: read the next batch and find its unique keys on a low-priority "
            "thread while the current one trains (same result; false: between steps).");
DEFINE_string(dense_optimizer, "adam", "Dense optimizer: sgd, adagrad or adam.");
DEFINE_double(dense_lr, 0.001, "Dense learning rate.");
DEFINE_bool(shuffle, true,
            "Shuffle the training examples every epoch (seeded by --seed): all of them with "
            "--reader=memory; with --reader=stream the file order, the pieces of each file "
            "and a --shuffle_buffer of examples.");
DEFINE_string(reader, "auto",
              "How --train_data is read: memory (every example loaded, then batched), stream "
              "(read in ~1 MiB pieces on --reader_threads threads while training runs, with "
              "bounded memory: for data larger than memory) or auto (stream when --test_data "
              "is given; memory when the test set is held out of the training data, or the "
              "data is generated).");
DEFINE_int32(reader_threads, 0,
             "Parser threads of --reader=stream; 0: a quarter of --threads, at least 1.");
DEFINE_validator(reader_threads, &IsNonNegative32);
DEFINE_int64(shuffle_buffer, 100000,
             "With --reader=stream and --shuffle: examples in the shuffle buffer (memory: "
             "about 500 bytes each for Criteo rows); 0: no buffer.");
DEFINE_validator(shuffle_buffer, &IsNonNegative64);
DEFINE_int32(num_shards, 1,
             "With --reader=stream: the training data is cut into this many shards, one per "
             "worker of a data-parallel job; each gets the same number of batches per epoch.");
DEFINE_validator(num_shards, &IsPositive32);
DEFINE_int32(shard_index, 0, "With --num_shards: the shard this worker reads, from 0.");
DEFINE_int64(piece_kib, 0,
             "With --reader=stream: KiB of text per piece (the unit of parsing, shuffling and "
             "sharding; columnar pieces have a row per 256 bytes of it). 0: 1024, or less for "
             "small input so that every shard has at least 8 pieces.");
DEFINE_validator(piece_kib, &IsNonNegative64);
DEFINE_validator(shard_index, &IsNonNegative32);
DEFINE_string(pipeline, "on",
              "on: run read, unique, pull, dense and push as an asynchronous pipeline (a worker "
              "per stage, --pipeline_depth batches in flight); off: one batch at a time through "
              "every stage (the reference; same result with --max_staleness=0).");
DEFINE_int32(pipeline_depth, 4, "--pipeline=on: batches in flight (buffers between stages).");
DEFINE_validator(pipeline_depth, &IsPositive32);
DEFINE_string(dense_device, "auto",
              "Where the dense step (the model's forward, backward and optimizer) runs: cpu, cuda "
              "(device 0) or cuda:N. auto: the planner's choice with --plan=auto (a GPU when this "
              "build has CUDA, a device is present and it is faster), else cpu.");
DEFINE_string(dense_precision, "f32",
              "The dense step's GEMM arithmetic: f32, or bf16/f16 (16-bit inputs, f32 "
              "accumulation and f32 master weights). On the CPU: f32, or bf16 where the CPU "
              "multiplies bf16 in hardware (AMX, AVX512-BF16; about 1.5x faster DLRM steps).");
DEFINE_int32(dense_row_shards, 0,
             "CPU dense step: split each batch into this many ranges of rows, each run through "
             "the whole model on one thread (its rows stay in that core's caches), the "
             "parameter gradients summed in range order. 0: one range per thread of the dense "
             "stage; 1: no split, every layer on the whole batch with all the threads. A "
             "fixed number N >= 2 makes the dense step's results the same bits whatever "
             "--threads is (its kernels then run single-threaded); 0 and 1 depend on it.");
DEFINE_validator(dense_row_shards, &IsNonNegative32);
DEFINE_string(stage_threads, "",
              "--pipeline=on: threads of the unique, pull, dense and push stages, comma-separated "
              "(e.g. 1,1,2,1; each at most --threads). Empty: the planner's split with "
              "--plan=auto, else 1 for unique, a quarter of --threads for pull and push and all "
              "of them for dense.");
DEFINE_int32(max_staleness, 0,
             "--pipeline=on: the most pushes of earlier batches a pulled embedding row may miss; "
             "0 trains exactly as --pipeline=off does.");
DEFINE_validator(max_staleness, &IsNonNegative32);
DEFINE_bool(early_pulls, true,
            "--pipeline=on: a pull waits only for in-flight batches that share rows with it "
            "(false: for the last --max_staleness + 1 pushes, whatever their rows).");
DEFINE_double(watchdog_seconds, 300,
              "Log a warning naming the stage that stays on one batch longer than this; 0: off.");
DEFINE_validator(watchdog_seconds, &IsNonNegativeDouble);
DEFINE_string(checkpoint_dir, "",
              "Write training checkpoints here (dense weights and optimizer state, embedding "
              "rows, the step): every --checkpoint_every_steps steps and when training ends or a "
              "signal stops it. Empty: none.");
DEFINE_int64(checkpoint_every_steps, 1000,
             "With --checkpoint_dir: steps between checkpoints; 0: only the final one.");
DEFINE_validator(checkpoint_every_steps, &IsNonNegative64);
DEFINE_bool(resume, true,
            "With --checkpoint_dir holding checkpoints: continue from the newest, giving the "
            "result of an uninterrupted run; the flags that decide that result must be those "
            "recorded in <checkpoint_dir>/job.flags (how long to train, outputs, threads, "
            "--pipeline and the disk tier may change). false: refuse to start.");
DEFINE_double(rank_timeout_seconds, 60,
              "Under mpirun: the longest a rank waits for the others in an exchange before the "
              "job fails, naming the ranks that did not answer (a rank that dies is reported by "
              "mpirun at once). Raise it if saving one rank's checkpoint takes longer.");
DEFINE_validator(rank_timeout_seconds, &IsPositiveDouble);
DEFINE_bool(expert_parallel, true,
            "Under mpirun, --model=moe: divide the experts among the ranks, each computing its "
            "experts for every rank's examples (all-to-all dispatch and combine); --num_experts "
            "must then be a multiple of the ranks (left at its default, this flag turns itself "
            "off when it is not). On GPUs the rows move over NCCL. false: every rank computes "
            "every expert for its own examples. Both train the same model.");
DEFINE_int32(pipeline_parallel, 1,
             "Under mpirun: split the dense model into stages over this many ranks (every rank "
             "of the job: -np must equal it). Rank 0 reads the data and holds the embedding "
             "table; each rank runs --virtual_stages chunks of the dense graph in a 1F1B or "
             "interleaved 1F1B schedule. 1: no split.");
DEFINE_validator(pipeline_parallel, &IsPositive32);
DEFINE_int32(virtual_stages, 1,
             "With --pipeline_parallel: chunks of the dense graph per rank (interleaved 1F1B "
             "when > 1; then --micro_batches must be a multiple of --pipeline_parallel).");
DEFINE_validator(virtual_stages, &IsPositive32);
DEFINE_int32(micro_batches, 1,
             "Micro-batches per step: each batch's dense forward and backward run in this many "
             "parts whose gradients are summed before one optimizer step (the pipeline's "
             "micro-batches with --pipeline_parallel; gradient accumulation without).");
DEFINE_validator(micro_batches, &IsPositive32);
DEFINE_string(pipeline_schedule, "",
              "With --pipeline_parallel or --micro_batches: the schedule, gpipe, 1f1b or "
              "interleaved; empty: interleaved when --virtual_stages > 1, else 1f1b "
              "(`ember plan --draw_schedule` draws one).");
DEFINE_bool(model_hash, false,
            "After training, print a hash of the whole trained state (dense weights and "
            "optimizer state, every embedding row by key) and add it to --metrics_out: equal "
            "hashes mean bit-identical models. Costs a scan of the table.");
DEFINE_string(metrics_out, "",
              "Write test and training metrics as JSON to this file (atomically); empty: don't.");
DEFINE_string(trace_file, "",
              "Write a Chrome trace (one span per stage per batch) to this file; empty: don't.");
DEFINE_int64(eval_every_steps, 0,
             "Evaluate on --test_data (or the held-out --test_fraction) every this many "
             "training steps, and when training ends; the history (step, examples, train loss, "
             "test AUC and logloss, samples/s) goes to the log and to train.history in "
             "--metrics_out. 0: only the final evaluation. Evaluating does not change the model.");
DEFINE_validator(eval_every_steps, &IsNonNegative64);
DEFINE_bool(eval_every_epoch, false,
            "Evaluate as --eval_every_steps does at the end of every epoch.");
DEFINE_string(plot_out, "",
              "Draw the run's curves (training loss, test AUC and logloss against training "
              "examples, from the evaluations of --eval_every_steps / --eval_every_epoch and the "
              "final one) into this SVG file; empty: don't.");

DEFINE_string(export_dir, "",
              "When training ends, write the serving bundle of the trained model here (a "
              "directory, written atomically; see `ember export`, `ember predict`); empty: "
              "don't.");

namespace ember::tools {

Result<engine::TrainOptions> TrainOptionsFromFlags() {
  engine::TrainOptions options;
  // The trainer sets the data's shape (num_dense, num_slots, num_tasks) and
  // embedding_dim from the data and the table.
  EMBER_ASSIGN_OR_RETURN(options.model, ModelOptionsFromFlags());
  options.table.dim = FLAGS_embedding_dim;
  options.batch_size = FLAGS_batch_size;
  options.epochs = FLAGS_epochs;
  options.max_steps = FLAGS_max_steps;
  options.timing_warmup_steps = FLAGS_timing_warmup_steps;
  options.threads = FLAGS_threads;
  options.seed = FLAGS_seed;
  options.shuffle = FLAGS_shuffle;
  EMBER_ASSIGN_OR_RETURN(options.table.optimizer.type,
                         embedding::ParseSparseOptimizer(FLAGS_sparse_optimizer));
  options.table.optimizer.learning_rate = static_cast<float>(FLAGS_sparse_lr);
  options.table.optimizer.ftrl_beta = static_cast<float>(FLAGS_ftrl_beta);
  options.table.optimizer.l1 = static_cast<float>(FLAGS_ftrl_l1);
  options.table.optimizer.l2 = static_cast<float>(FLAGS_ftrl_l2);
  using Admission = embedding::AdmissionOptions::Kind;
  if (FLAGS_admission == "none") {
    options.table.admission.kind = Admission::kNone;
  } else if (FLAGS_admission == "frequency") {
    options.table.admission.kind = Admission::kFrequency;
  } else if (FLAGS_admission == "probability") {
    options.table.admission.kind = Admission::kProbability;
  } else {
    return Status::InvalidArgument("--admission=", FLAGS_admission,
                                   " is not known; use none, frequency or probability");
  }
  options.table.admission.min_count = FLAGS_admission_min_count;
  options.table.admission.probability = FLAGS_admission_probability;
  options.table.ttl_steps = FLAGS_embedding_ttl_steps;
  if (!FLAGS_embedding_memory_budget.empty()) {
    EMBER_ASSIGN_OR_RETURN(options.table.memory_budget_bytes,
                           ParseByteSize("embedding_memory_budget", FLAGS_embedding_memory_budget));
    if (options.table.memory_budget_bytes == 0) {
      return Status::InvalidArgument("--embedding_memory_budget must be > 0 when set");
    }
  }
  {
    Result<embedding::EmbeddingTableOptions::EvictionPolicy> policy =
        embedding::ParseEvictionPolicy(FLAGS_embedding_eviction);
    if (!policy.ok()) {
      return Status::InvalidArgument("--embedding_eviction=", FLAGS_embedding_eviction,
                                     " is not known; use lru or lfu");
    }
    options.table.eviction_policy = *policy;
  }
  options.table.disk_path = FLAGS_embedding_dir;
  options.embedding_reserve_rows = FLAGS_embedding_reserve_rows;
  options.pipeline.prefetch = FLAGS_prefetch;
  options.pipeline.read_ahead = FLAGS_read_ahead;
  EMBER_ASSIGN_OR_RETURN(options.dense_optimizer.type,
                         ops::ParseDenseOptimizer(FLAGS_dense_optimizer));
  options.dense_optimizer.learning_rate = static_cast<float>(FLAGS_dense_lr);
  if (FLAGS_pipeline != "on" && FLAGS_pipeline != "off") {
    return Status::InvalidArgument("--pipeline=", FLAGS_pipeline, " is not known; use on or off");
  }
  options.pipeline.pipelined = FLAGS_pipeline == "on";
  Result<ops::ComputePrecision> precision = ops::ParseComputePrecision(FLAGS_dense_precision);
  if (!precision.ok()) return precision.status().WithContext("--dense_precision");
  options.model.precision = *precision;
  options.model.cpu_row_shards = FLAGS_dense_row_shards;
  if (FLAGS_dense_device != "auto") {
    Result<Device> device = ParseDevice(FLAGS_dense_device);
    if (!device.ok()) return device.status().WithContext("--dense_device");
    options.model.device = *device;
  }
  options.pipeline.depth = FLAGS_pipeline_depth;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> stage_threads,
                         ParseWidths("stage_threads", FLAGS_stage_threads));
  EMBER_ASSIGN_OR_RETURN(options.pipeline.stage_threads,
                         pipeline::WorkerStageThreads(stage_threads));
  options.pipeline.max_staleness = FLAGS_max_staleness;
  options.pipeline.early_pulls = FLAGS_early_pulls;
  options.pipeline.watchdog_seconds = FLAGS_watchdog_seconds;
  options.eval_every_steps = FLAGS_eval_every_steps;
  options.eval_every_epoch = FLAGS_eval_every_epoch;
  // The ranks and their communicators come with the job's ranks (ApplyRanks).
  options.pipeline_parallel.virtual_stages = FLAGS_virtual_stages;
  options.pipeline_parallel.micro_batches = FLAGS_micro_batches;
  options.pipeline_parallel.schedule = FLAGS_pipeline_schedule;
  EMBER_RETURN_IF_ERROR(engine::ValidateTrainOptions(options));
  return options;
}

namespace {

// Whether the metrics JSON at `path` is that of a run that finished the job
// at step `step`: not interrupted, and ending there.
bool MetricsOfJobFinishedAt(const std::string& path, int64_t step) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  Result<JsonValue> json = ParseJson(*text);
  if (!json.ok()) return false;
  const JsonValue* train = json->Find("train");
  if (train == nullptr) return false;
  const JsonValue* interrupted = train->Find("interrupted");
  const JsonValue* steps = train->Find("steps");
  const JsonValue* resumed = train->Find("resumed_from_step");
  if (interrupted == nullptr || interrupted->boolean || steps == nullptr || resumed == nullptr) {
    return false;
  }
  return std::strtoll(steps->text.c_str(), nullptr, 10) +
             std::strtoll(resumed->text.c_str(), nullptr, 10) ==
         step;
}

// The files whose flags configure a training job.
const std::vector<std::string> kTrainFlagFiles = {"tools/train_command.cc",
                                                  "tools/format_flags.cc"};

// SIGINT/SIGTERM during training (tools/stop_signals.h): the first asks it
// to stop after the step in progress (the checkpoint, summary and evaluation
// still run); a second one exits at once.
std::atomic<bool> g_stop_requested{false};

// Fails, naming `flag`, unless an output can be written at `path`: its
// directory exists and takes a new file of the name the atomic writer gives
// it first (<path>.tmp.<pid>.<n>; a name too long, a read-only or full
// file system fail here rather than after training).
Status CheckOutputPath(const char* flag, const std::string& path) {
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(path).WithContext(flag));
  const std::string probe = path + ".tmp." + std::to_string(::getpid()) + ".check";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::InvalidArgument(flag, "=", path, ": cannot create a file there (",
                                   std::strerror(errno), ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

// --export_dir: the serving bundle of the trained model, with the input
// format training read (`source_format`: "columnar" or a text format).
Status ExportTrained(engine::Trainer& trainer, embedding::EmbeddingTable& table,
                     const engine::TrainReport& report, const std::string& source_format) {
  EMBER_ASSIGN_OR_RETURN(const io::FormatSpec input, FormatSpecFromFlags());
  const engine::BundleConfig config =
      engine::BundleConfigOf(trainer.options(), input, source_format == "columnar",
                             report.resumed_from_step + report.steps);
  EMBER_RETURN_IF_ERROR(engine::WriteBundle(FLAGS_export_dir, config, trainer.model(), table)
                            .WithContext("--export_dir"));
  LOG(INFO) << "wrote the serving bundle of step " << config.step << " to " << FLAGS_export_dir;
  return Status::OK();
}

// With a dense model on a GPU under mpirun: one GPU per rank of a host (its
// local rank among the host's ranks), and the dense stage's communicator
// over NCCL (the data-parallel gradients' all-reduce, or a pipeline's
// activations and gradients).
Status UseLocalGpu(JobRanks& ranks, engine::TrainOptions* options) {
  if (!options->model.device.is_cuda()) return Status::OK();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int devices = CudaDeviceCount();
  if (devices > 0) {
    options->model.device = Device::Cuda((local != nullptr ? std::atoi(local) : 0) % devices);
  }
  return ranks.UseNcclForDense(options->model.device.index, FLAGS_rank_timeout_seconds);
}

// Under mpirun: each rank trains its shard of the data with its own rows,
// in its own directories; rank 0 reports. Refuses what does not apply.
Status ApplyRanks(JobRanks& ranks, engine::TrainOptions* options) {
  if (FLAGS_pipeline_parallel != ranks.size()) {
    if (FLAGS_pipeline_parallel > 1) {
      return Status::InvalidArgument(
          "--pipeline_parallel=", FLAGS_pipeline_parallel, " splits the dense model over that "
          "many ranks, and this job has ", ranks.size(), ": run it under mpirun -np ",
          FLAGS_pipeline_parallel, " (data parallelism across pipelines is not supported yet)");
    }
  } else if (ranks.several()) {
    // A pipeline: rank 0 trains as a job of one rank (all the data, the
    // whole table) whose dense stage runs the pipeline; the others serve.
    EMBER_RETURN_IF_ERROR(UseLocalGpu(ranks, options));
    options->pipeline_parallel.ranks = ranks.size();
    options->pipeline_parallel.stages = ranks.pipeline_stages();
    options->pipeline_parallel.commands = ranks.pipeline_commands();
    options->show_progress = options->show_progress && ranks.rank() == 0;
    if (!FLAGS_trace_file.empty()) FLAGS_trace_file += ".rank-" + std::to_string(ranks.rank());
    return Status::OK();
  }
  if (!ranks.several()) return Status::OK();
  if (FLAGS_num_shards > 1 || FLAGS_shard_index > 0) {
    return Status::InvalidArgument(
        "--num_shards/--shard_index: under mpirun every rank reads shard <rank> of <ranks> of "
        "--train_data by itself; drop these flags");
  }
  EMBER_RETURN_IF_ERROR(UseLocalGpu(ranks, options));
  options->ranks = ranks.group();
  options->expert_parallel = FLAGS_expert_parallel;
  if (FLAGS_expert_parallel && options->model.name == "moe" &&
      options->model.num_experts % ranks.size() != 0 &&
      gflags::GetCommandLineFlagInfoOrDie("expert_parallel").is_default) {
    LOG(WARNING) << "--expert_parallel: off, --num_experts=" << options->model.num_experts
                 << " does not divide among " << ranks.size()
                 << " ranks; every rank computes every expert";
    options->expert_parallel = false;
  }
  options->show_progress = options->show_progress && ranks.rank() == 0;
  if (!options->table.disk_path.empty()) {
    options->table.disk_path += "/rank-" + std::to_string(ranks.rank());
  }
  if (!FLAGS_trace_file.empty()) FLAGS_trace_file += ".rank-" + std::to_string(ranks.rank());
  return Status::OK();
}

Status Train(JobRanks& ranks, int* stopped_by) {
  LogEffectiveFlags(kTrainFlagFiles);
  EMBER_RETURN_IF_ERROR(ranks.CheckSameFlags(EffectiveFlags(kTrainFlagFiles)));
  EMBER_ASSIGN_OR_RETURN(engine::TrainOptions options, TrainOptionsFromFlags());
  EMBER_RETURN_IF_ERROR(ApplyRanks(ranks, &options));
  const bool reports = ranks.rank() == 0;
  // Ranks that train data in parallel (not the stages of a pipeline).
  const bool data_parallel = options.ranks.active();
  // Fail now rather than after hours of training.
  for (const auto& [flag, path] : {std::pair{"--metrics_out", FLAGS_metrics_out},
                                   std::pair{"--trace_file", FLAGS_trace_file},
                                   std::pair{"--plot_out", FLAGS_plot_out}}) {
    if (!path.empty() && (reports || std::string(flag) == "--trace_file")) {
      EMBER_RETURN_IF_ERROR(CheckOutputPath(flag, path));
    }
  }
  if (!FLAGS_export_dir.empty() && reports) {
    EMBER_RETURN_IF_ERROR(CheckWritableDestination(FLAGS_export_dir).WithContext("--export_dir"));
  }
  if (!FLAGS_plot_out.empty() && std::filesystem::path(FLAGS_plot_out).extension() != ".svg") {
    return Status::InvalidArgument("--plot_out=", FLAGS_plot_out,
                                   ": the curves are drawn as SVG; name a .svg file");
  }
  // --plan=auto|off|FILE (tools/plan_flags.h) sets threads and pipeline knobs.
  EMBER_ASSIGN_OR_RETURN(const scheduler::Plan plan, ApplyTrainPlan(&options));
  // A pipeline's stages read no data: rank 0 tells them the examples' shape
  // (their model's inputs and outputs) once it has read the data.
  const bool pipeline_stages = options.pipeline_parallel.ranks > 1;
  std::vector<int64_t> shape(3);
  if (pipeline_stages && !reports) {
    EMBER_RETURN_IF_ERROR(options.pipeline_parallel.commands->Broadcast(shape, 0)
                              .WithContext("waiting for rank 0 to read the data"));
    // The embedding table is rank 0's: a stage keeps an empty one in memory.
    options.table.memory_budget_bytes = 0;
    options.table.disk_path.clear();
    EMBER_ASSIGN_OR_RETURN(auto stage,
                           engine::Trainer::Create(options, static_cast<int>(shape[0]),
                                                   static_cast<int>(shape[1]),
                                                   static_cast<int>(shape[2])));
    // A stage of rank 0's pipeline: rank 0 trains, checkpoints and reports.
    return stage->ServePipeline();
  }

  TempDir temp_dir;
  EMBER_ASSIGN_OR_RETURN(Data data, LoadData(&temp_dir, plan.threads,
                                          data_parallel ? Shard{ranks.size(), ranks.rank()}
                                                        : Shard{FLAGS_num_shards, FLAGS_shard_index},
                                          data_parallel));
  if (pipeline_stages) {
    shape = {data.num_dense, data.num_slots, data.num_labels};
    EMBER_RETURN_IF_ERROR(options.pipeline_parallel.commands->Broadcast(shape, 0)
                              .WithContext("telling the pipeline's stages the data's shape"));
  }
  TempDir embedding_temp_dir;
  if (options.table.memory_budget_bytes > 0 && options.table.disk_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(options.table.disk_path, embedding_temp_dir.Create("ember-train"));
  }
  if (options.table.memory_budget_bytes == 0) TuneProcessAllocatorWithoutMemoryBudget();
  std::unique_ptr<Tracer> tracer;
  if (!FLAGS_trace_file.empty()) {
    tracer = std::make_unique<Tracer>();
    options.pipeline.tracer = tracer.get();
  }
  options.stop_requested = &g_stop_requested;
  // Evaluations during training: the test data as the final evaluation
  // reads it (a stream is read afresh each time).
  engine::Trainer* evaluated_trainer = nullptr;
  if (FLAGS_eval_every_steps > 0 || FLAGS_eval_every_epoch || !FLAGS_plot_out.empty()) {
    options.evaluate = [&]() -> Result<engine::Metrics> {
      if (!data.test_stream) return evaluated_trainer->Evaluate(data.test);
      Result<InputStream> test = OpenInputStream(data.test_paths, data.test_options);
      if (!test.ok()) return test.status().WithContext("--test_data");
      return evaluated_trainer->Evaluate(*test->reader);
    };
  }
  options.checkpoint.dir = FLAGS_checkpoint_dir;
  options.checkpoint.every_steps = FLAGS_checkpoint_every_steps;
  EMBER_ASSIGN_OR_RETURN(auto trainer,
                         engine::Trainer::Create(options, data.num_dense, data.num_slots,
                                                 data.num_labels));
  evaluated_trainer = trainer.get();
  if (!FLAGS_checkpoint_dir.empty()) {
    EMBER_ASSIGN_OR_RETURN(const int64_t newest, trainer->NewestCheckpointStep());
    if (newest >= 0 && !FLAGS_resume) {
      return Status::InvalidArgument("--checkpoint_dir ", FLAGS_checkpoint_dir,
                                     " holds a checkpoint of step ", newest,
                                     "; pass --resume to continue it, or choose another directory");
    }
    if (newest >= 0) {
      EMBER_RETURN_IF_ERROR(CheckResumeFlags(FLAGS_checkpoint_dir, kTrainFlagFiles));
      Result<int64_t> step = trainer->Restore();
      if (!step.ok()) return step.status().WithContext("--checkpoint_dir");
      LOG(INFO) << "resumed from the checkpoint of step " << *step << " in "
                << FLAGS_checkpoint_dir;
    } else if (reports) {
      // One record for the job (with ranks: rank 0's, in the job's directory).
      EMBER_RETURN_IF_ERROR(RecordJobFlags(FLAGS_checkpoint_dir, kTrainFlagFiles));
      EMBER_RETURN_IF_ERROR(RecordJobInput(FLAGS_checkpoint_dir,
                                           {data.num_dense, data.num_slots, data.num_labels,
                                            data.train_source.format == "columnar"}));
    }
  }
  // A first SIGINT/SIGTERM ends training after the batches in flight.
  Result<engine::TrainReport> fit = [&] {
    StopOnSignal stop_on_signal(&g_stop_requested);
    Result<engine::TrainReport> result =
        data.train_stream ? trainer->Fit(*data.train_stream) : trainer->Fit(data.train);
    *stopped_by = stop_on_signal.signal();
    return result;
  }();
  if (data.train_stream) {
    data.train_source.stream = data.train_stream->stats();
    data.train_source.bad_lines = data.train_source.stream->bad_lines;
  }
  EMBER_RETURN_IF_ERROR(fit.status());
  EMBER_RETURN_IF_ERROR(trainer->FinishPipeline());
  engine::TrainReport report = *std::move(fit);
  if (data_parallel) {
    // The job's examples and speed: every rank's, trained in step.
    EMBER_ASSIGN_OR_RETURN(const int64_t job_examples, ranks.SumOverRanks(report.examples));
    const double scale = report.examples > 0 ? static_cast<double>(job_examples) / report.examples
                                             : 0.0;
    report.examples = job_examples;
    report.samples_per_sec *= scale;
    report.steady_samples_per_sec *= scale;
  }
  // A finished job's metrics, trace and plot are those of the run that
  // finished it, unless that run was stopped between its last checkpoint and
  // writing them (--metrics_out is then missing, or an earlier run's: one
  // stopped by a signal, or one that ended at an earlier step): then they
  // are written now, from the checkpoint.
  const bool outputs_written =
      FLAGS_metrics_out.empty() ||
      MetricsOfJobFinishedAt(FLAGS_metrics_out, report.resumed_from_step);
  if (report.already_finished && !outputs_written) {
    LOG(WARNING) << "the job in --checkpoint_dir=" << FLAGS_checkpoint_dir
                 << " had finished training, but --metrics_out=" << FLAGS_metrics_out
                 << " does not hold the metrics of the run that finished it (that run stopped "
                    "first): writing them from the checkpoint";
  }
  if (report.already_finished && outputs_written) {
    std::printf("ember train: the job in --checkpoint_dir=%s had finished training at step %lld; "
                "nothing to train, its outputs are left as they were (raise --epochs or "
                "--max_steps to train on)\n",
                FLAGS_checkpoint_dir.c_str(), static_cast<long long>(report.resumed_from_step));
    std::fflush(stdout);
    return Status::OK();
  }
  LOG(INFO) << "stages: " << StageSummary(report.stage_times, report.train_seconds);
  // Reading runs on the trainer's own thread.
  std::string threads;
  for (pipeline::Stage s : pipeline::kAllStages) {
    if (s == pipeline::Stage::kRead) continue;
    threads += (threads.empty() ? "" : ", ") + std::string(pipeline::StageName(s)) + " " +
               std::to_string(report.stage_threads[s]);
  }
  LOG(INFO) << "stage threads: " << threads;
  if (report.pipelined) {
    LOG(INFO) << "pipeline: staleness of pulled rows " << report.staleness.ToString() << " (mean "
              << report.staleness.mean() << "); " << report.staleness.waits
              << " pulls waited for pushes, " << report.staleness.wait_seconds << " s in all";
  }
  if (report.interrupted) {
    LOG(WARNING) << "training stopped by a signal after " << report.steps << " steps";
  }
  if (report.checkpoints_written > 0) {
    LOG(INFO) << "checkpoints: " << report.checkpoints_written << " written, the last of step "
              << report.last_checkpoint_step << " in " << FLAGS_checkpoint_dir;
  }
  LOG(INFO) << "embeddings: " << EmbeddingSummary(report.embedding, report.train_seconds);
  if (report.moe_choices > 0) {
    // With ranks, each rank's own batches.
    const std::string who =
        data_parallel ? " (rank " + std::to_string(ranks.rank()) + ")" : std::string();
    LOG(INFO) << "moe" << who << ": "
              << report.moe_dropped_examples / static_cast<double>(report.steps)
              << " examples a step lost a choice to a full expert ("
              << report.moe_dropped_choices << " of " << report.moe_choices
              << " choices dropped); load-balancing loss " << report.moe_aux_loss_sum / report.steps
              << " a step (1 a layer when balanced)";
    if (report.moe_exchanged_bytes > 0) {
      LOG(INFO) << "moe" << who << ": experts divided among the ranks; the expert layers sent "
                << report.moe_exchanged_bytes / report.steps << " bytes a step, exchanging for "
                << 1e3 * report.moe_exchange_seconds / report.steps << " ms a step";
    }
  }
  if (data_parallel && report.steps > 0) {
    const embedding::TableStats& t = report.embedding;
    LOG(INFO) << "exchanges of rank " << ranks.rank() << ": " << t.exchanged_bytes / report.steps
              << " bytes a step (the least possible: " << t.exchanged_bytes_minimum / report.steps
              << ")";
  }
  // With ranks, the whole table on rank 0 for the hash and the bundle.
  std::unique_ptr<embedding::EmbeddingTable> gathered;
  if (data_parallel && (FLAGS_model_hash || !FLAGS_export_dir.empty())) {
    EMBER_ASSIGN_OR_RETURN(gathered,
                           ranks.GatherTable(trainer->table(), trainer->options().table));
  }
  embedding::EmbeddingTable* whole = gathered ? gathered.get() : &trainer->table();
  std::string model_hash;
  if (FLAGS_model_hash && reports) {
    EMBER_ASSIGN_OR_RETURN(const uint64_t hash,
                           engine::HashTrainedModel(trainer->model(), *whole));
    model_hash = engine::ModelHashHex(hash);
    std::printf("model hash: %s\n", model_hash.c_str());
  }
  Result<engine::Metrics> evaluated =
      data.test_stream ? trainer->Evaluate(*data.test_stream) : trainer->Evaluate(data.test);
  if (data.test_stream) {
    data.test_source->stream = data.test_stream->stats();
    data.test_source->bad_lines = data.test_source->stream->bad_lines;
  }
  if (!evaluated.ok()) return evaluated.status().WithContext("--test_data");
  const engine::Metrics& test = *evaluated;
  if (!reports) {
    // Every rank took part in the evaluation; rank 0 reports and writes.
    if (tracer) {
      EMBER_RETURN_IF_ERROR(tracer->WriteJson(FLAGS_trace_file).WithContext("--trace_file"));
    }
    return Status::OK();
  }

  std::string steady;
  if (FLAGS_timing_warmup_steps > 0 && report.steady_samples_per_sec > 0) {
    steady = " (" + std::to_string(std::llround(report.steady_samples_per_sec)) +
             " after the first " + std::to_string(FLAGS_timing_warmup_steps) + " steps)";
  }
  // A run a signal stopped says so in its summary, not only in the log.
  const std::string interrupted =
      *stopped_by != 0 ? "interrupted (signal " + std::to_string(*stopped_by) + ") after " : "";
  std::printf("train: %s%lld steps, %lld examples, %.0f samples/s%s, last epoch loss %.4f\n",
              interrupted.c_str(), static_cast<long long>(report.steps),
              static_cast<long long>(report.examples),
              report.samples_per_sec, steady.c_str(), report.last_epoch_loss);
  PrintTestMetrics(test);
  if (data.ceiling_auc.size() == 1 ||
      (data.ceiling_auc.size() > 1 && data.ceiling_auc.size() != test.tasks.size())) {
    std::printf("planted-model ceiling AUC %.4f (gap %.4f)\n", data.ceiling_auc[0],
                data.ceiling_auc[0] - test.auc);
  } else {
    for (size_t t = 0; t < data.ceiling_auc.size(); ++t) {
      std::printf("planted-model ceiling AUC, task %zu: %.4f (gap %.4f)\n", t,
                  data.ceiling_auc[t], data.ceiling_auc[t] - test.tasks[t].auc);
    }
  }
  std::printf("input: train data %s\n", SourceSummary(data.train_source).c_str());
  if (data.test_source) {
    std::printf("input: test data %s\n", SourceSummary(*data.test_source).c_str());
  }
  std::fflush(stdout);

  if (!FLAGS_export_dir.empty()) {
    EMBER_RETURN_IF_ERROR(ExportTrained(*trainer, *whole, report, data.train_source.format));
  }
  if (tracer) {
    EMBER_RETURN_IF_ERROR(tracer->WriteJson(FLAGS_trace_file).WithContext("--trace_file"));
    LOG(INFO) << "wrote trace " << FLAGS_trace_file;
  }
  if (!FLAGS_plot_out.empty()) {
    const std::string svg = RunCurvesSvg(report.history, options.model.name);
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(FLAGS_plot_out, svg).WithContext("--plot_out"));
    LOG(INFO) << "wrote the run's curves to " << FLAGS_plot_out;
  }
  if (!FLAGS_metrics_out.empty()) {
    JsonObject test_json = TestMetricsJson(test);
    if (!data.ceiling_auc.empty()) test_json.Add("ceiling_auc", data.ceiling_auc[0]);
    if (data.ceiling_auc.size() > 1 && !test.tasks.empty()) {
      test_json.AddRaw("task_ceiling_auc", JsonNumberArray(data.ceiling_auc));
    }
    JsonObject train_json = TrainReportJson(report, FLAGS_timing_warmup_steps);
    if (!model_hash.empty()) train_json.Add("model_hash", model_hash);
    JsonObject input_json;
    input_json.Add("train", SourceJson(data.train_source));
    if (data.test_source) input_json.Add("test", SourceJson(*data.test_source));
    JsonObject root;
    root.Add("model", options.model.name).Add("test", test_json).Add("train", train_json);
    root.Add("input", input_json);
    EMBER_RETURN_IF_ERROR(
        WriteFileAtomic(FLAGS_metrics_out, root.ToString()).WithContext("--metrics_out"));
  }
  return Status::OK();
}

}  // namespace

int RunTrain() {
  int stopped_by = 0;
  Result<std::unique_ptr<JobRanks>> ranks = JobRanks::Join(FLAGS_rank_timeout_seconds);
  const Status status = ranks.ok() ? Train(**ranks, &stopped_by) : ranks.status();
  if (!status.ok()) {
    // The other ranks' exchanges with this one fail at once, naming it.
    if (ranks.ok()) (*ranks)->Abort(status);
    const std::string who = ranks.ok() && (*ranks)->several()
                                ? " (rank " + std::to_string((*ranks)->rank()) + " of " +
                                      std::to_string((*ranks)->size()) + ")"
                                : "";
    std::fprintf(stderr, "ember train%s: %s\n", who.c_str(), status.ToString().c_str());
    return ExitCodeFor(status);
  }
  ranks->reset();
  const Status finished = FinishJobRanks();
  if (!finished.ok()) {
    std::fprintf(stderr, "ember train: %s\n", finished.ToString().c_str());
    return ExitCodeFor(finished);
  }
  // A job stopped by a signal has not finished, though everything it did is
  // saved: a scheduler that sees a failure restarts it (with --resume).
  return stopped_by != 0 ? kExitSignalBase + stopped_by : kExitOk;
}

}  // namespace ember::tools
